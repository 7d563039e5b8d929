"""Files as text (unit): which names are read, and a package's documentation
folder as Debian ships it (/usr/share/doc/<package>), whose plain-text files
are named by convention, not by a suffix."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from services.core.models import ContentType, Document
from services.sources.loaders import LoadError, load_directory
from services.sources.text_files import (
    content_type_for_filename,
    is_conventional_text_name,
    name_as_title,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "name",
    [
        "README",
        "NEWS.gz",
        "FAQ",
        "ChangeLog",
        "README.Debian",
        "changelog.Debian.amd64.gz",
        "COPYING.LIB",
        "LICENSE-MIT",
        "RELEASE_NOTES",
        "README.abs-guide",
        "copyright",
        "README_MISSING_SYSCALL_OR_IOCTL.gz",
        "COPYING-GPL-3",
        "README.C++",
        "changelog.libstdc++.gz",
        "README.zh_CN",
    ],
)
def test_conventional_documentation_names_are_plain_text(name: str) -> None:
    assert is_conventional_text_name(name)
    assert content_type_for_filename(name) is ContentType.TEXT


@pytest.mark.parametrize(
    "name",
    ["license.js", "todo.py", "INSTALL.sh", "install.ts", "notice-calendar.tsx", "notes.pdf",
     "SECURITY.yml", "readme.vue", "licenses", "Makefile", "news.component.tsx", "Install.pm",
     "install.pyi", "usage.proto", "NEWS.xz", "history.db", "notes.pkl", "LICENSE.java"],
)  # fmt: skip
def test_code_and_other_formats_named_alike_are_not(name: str) -> None:
    assert not is_conventional_text_name(name)


def test_a_title_from_the_name_keeps_a_tail_that_is_no_format() -> None:
    assert name_as_title("guide/intro.md") == "intro"
    assert name_as_title("README.Debian") == "README.Debian"
    assert name_as_title("doc/NEWS.gz") == "NEWS"
    assert name_as_title("man1/ls.1.gz") == "ls"


def test_a_debian_documentation_folder_loads_its_conventional_files(tmp_path: Path) -> None:
    """bash's folder: a README with an underlined title, a compressed NEWS, a
    changelog whose first underlined line is deep inside (no title), a
    `copyright`; a script and an unknown file are reported, not read."""
    (tmp_path / "README").write_text("Introduction\n============\n\nThis is GNU Bash.\n")
    news = "This is a terse description of the new features.\n\nnew: `wait -p`\n"
    (tmp_path / "NEWS.gz").write_bytes(gzip.compress(news.encode()))
    entries = "".join(f"{n}. Fixed a bug in the parser, entry {n}.\n\n" for n in range(200))
    changes = entries + "4.  New Features in Readline\n----------------------------\n\nx\n"
    (tmp_path / "CHANGES").write_text(changes)
    (tmp_path / "copyright").write_text("Format: https://www.debian.org/doc/packaging-manuals/\n")
    (tmp_path / "install.sh").write_text("#!/bin/sh\n")
    (tmp_path / "inputrc.arrows").write_text("set editing-mode vi\n")
    (tmp_path / "install-sh").write_text("#!/bin/sh\n# install - install a program\n")
    (tmp_path / "NEWS.Debian").write_bytes(b"SQLite format 3\x00\x10\x00\x01\x01")
    (tmp_path / "AUTHORS").write_bytes("Ram\u00f3n, Bj\u00f6rn\n".encode("latin-1"))
    loaded = list(load_directory(tmp_path, scope_id="bash"))
    docs = {d.doc_id: d for d in loaded if isinstance(d, Document)}
    assert {doc_id: d.title for doc_id, d in docs.items()} == {
        "CHANGES": "CHANGES",
        "NEWS.gz": "NEWS",
        "README": "Introduction",
        "copyright": "copyright",
    }
    assert docs["NEWS.gz"].text == news and docs["NEWS.gz"].content_type is ContentType.TEXT
    # Left out by rule, never failed: a failure would keep `ingest --sync` from removing.
    errors = {e.source: e.reason for e in loaded if isinstance(e, LoadError) and e.skipped}
    assert len(errors) == len([e for e in loaded if isinstance(e, LoadError)]) == 4
    assert "inputrc.arrows, install.sh" in errors["."]
    assert errors["install-sh"].endswith("but a script: left out")
    assert errors["NEWS.Debian"].endswith("but binary data: left out")
    assert (
        "not UTF-8 (one in a legacy encoding is read with --fallback-encoding)" in errors["AUTHORS"]
    )
    latin = list(load_directory(tmp_path, scope_id="bash", fallback_encoding="latin-1"))
    assert any(isinstance(d, Document) and d.text == "Ram\u00f3n, Bj\u00f6rn\n" for d in latin)
    assert not any(isinstance(d, Document) and d.doc_id == "NEWS.Debian" for d in latin)


def test_a_readme_and_its_translation_by_name_are_linked(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("Hello\n=====\n\nThis program prints a greeting.\n")
    (tmp_path / "README.zh_CN").write_text("你好\n====\n\n这个程序打印一句问候。\n")
    docs = {d.doc_id: d for d in load_directory(tmp_path, scope_id="x") if isinstance(d, Document)}
    assert {doc_id: (d.locale, d.title) for doc_id, d in docs.items()} == {
        "README": ("en", "Hello"),
        "README.zh_CN": ("zh-CN", "你好"),
    }
    assert '"doc_id":"README.zh_CN"' in docs["README"].metadata["translations"]


def test_a_conventional_file_cut_inside_a_character_is_unread_not_left_out(
    tmp_path: Path,
) -> None:
    """A README caught mid-save is no legacy file: reported as unreadable (so
    --sync removes nothing), not left out by rule (so --sync removed the
    indexed one: probe). A Latin-1 file ending in an accent stays left out."""
    (tmp_path / "README.zh_CN").write_bytes("你好\n====\n\n这个程序打印".encode()[:-1])
    (tmp_path / "AUTHORS").write_bytes("Authors: Jos\u00e9".encode("latin-1"))
    loaded = [e for e in load_directory(tmp_path, scope_id="x") if isinstance(e, LoadError)]
    assert {e.source: e.skipped for e in loaded} == {"README.zh_CN": False, "AUTHORS": True}
    (cut,) = [e for e in loaded if e.source == "README.zh_CN"]
    assert "cannot decode" in cut.reason
