"""Pages saved gzip-compressed, as Debian installs most of /usr/share/doc
(`README.md.gz`, `manual.txt.gz`), are read as the page they hold; a
corrupt, truncated or expanding-without-end file is refused alone. Real
files in a temporary folder, compressed with the gzip module."""

from __future__ import annotations

import gzip
import json
import os
import random
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.models import ContentType, Document
from services.sources.compressed_pages import page_bytes, page_name, page_size
from services.sources.loaders import (
    LoadError,
    content_type_for_filename,
    load_beir_jsonl,
    load_directory,
)

pytestmark = pytest.mark.unit

README = "# Redis\n\nRun `redis-server --port 6380` to listen on another port.\n"


def write(root: Path, relpath: str, data: bytes) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def load(root: Path) -> tuple[dict[str, Document], dict[str, LoadError]]:
    items = list(load_directory(root, scope_id="s"))
    docs = {i.doc_id: i for i in items if isinstance(i, Document)}
    return docs, {i.source: i for i in items if isinstance(i, LoadError)}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("README.md.gz", ContentType.MARKDOWN),
        ("changelog.html.GZ", ContentType.HTML),
        ("users-and-groups.txt.gz", ContentType.TEXT),
        ("README.rst.gz", ContentType.TEXT),
    ],
)
def test_a_compressed_page_has_the_type_of_the_page_it_holds(
    name: str, expected: ContentType
) -> None:
    assert content_type_for_filename(name) is expected


def test_a_compressed_file_of_another_type_is_still_unsupported() -> None:
    with pytest.raises(Exception, match=r"unsupported file type 'notes\.json\.gz'.*\.gz"):
        content_type_for_filename("notes.json.gz")
    assert page_name("a.md.gz") == "a.md" and page_name("a.md") == "a.md"


def test_a_folder_of_compressed_pages_is_loaded_as_their_pages(tmp_path: Path) -> None:
    write(tmp_path, "redis/README.md.gz", gzip.compress(README.encode()))
    page = "<html><head><title>Changes</title></head><body><h1>3.12</h1><p>Faster.</p></body>"
    write(tmp_path, "python/changelog.html.gz", gzip.compress(page.encode()))
    write(tmp_path, "python/changelog.Debian.gz", gzip.compress(b"python3 (3.11.2-6)\n"))
    write(tmp_path, "notes.txt.gz", gzip.compress("plain notes\n".encode("utf-16")))
    write(tmp_path, "python/COMPAT.gz", gzip.compress(b"compatibility notes\n"))
    docs, errors = load(tmp_path)
    assert sorted(docs) == [
        "notes.txt.gz",
        "python/changelog.Debian.gz",
        "python/changelog.html.gz",
        "redis/README.md.gz",
    ]
    assert docs["python/changelog.Debian.gz"].content_type is ContentType.TEXT
    # COMPAT.gz is no page type nor a conventional name: not read, and the report says so.
    assert {source: error.reason for source, error in errors.items()} == {
        ".": "1 file(s) not read: not of a type the folder loader reads (docs/indexing.md, "
        '"Loading a folder"): python/COMPAT.gz'
    }
    readme = docs["redis/README.md.gz"]
    assert (readme.text, readme.title, readme.content_type) == (
        README,
        "Redis",
        ContentType.MARKDOWN,
    )
    assert docs["python/changelog.html.gz"].text == "# 3.12\n\nFaster."
    assert docs["notes.txt.gz"].text == "plain notes\n"  # its byte-order mark read after gunzip
    assert docs["notes.txt.gz"].title == "notes"  # the page's name, without .txt.gz


def test_concatenated_members_are_read_as_gzip_reads_them(tmp_path: Path) -> None:
    data = gzip.compress(b"# Part one\n\n") + gzip.compress(b"Part two.\n") + b"\0" * 8
    write(tmp_path, "joined.md.gz", data)
    docs, errors = load(tmp_path)
    assert docs["joined.md.gz"].text == "# Part one\n\nPart two.\n" and not errors


def test_corrupt_and_truncated_files_are_refused_alone(tmp_path: Path) -> None:
    whole = gzip.compress(README.encode() * 50)
    write(tmp_path, "ok.md.gz", gzip.compress(README.encode()))
    write(tmp_path, "plain-named.md.gz", README.encode())  # not compressed at all
    write(tmp_path, "cut.md.gz", whole[: len(whole) // 2])
    write(tmp_path, "empty.md.gz", b"")
    docs, errors = load(tmp_path)
    assert list(docs) == ["ok.md.gz"]
    assert errors["plain-named.md.gz"].reason.startswith("cannot read: not readable as gzip (")
    assert errors["cut.md.gz"].reason == (
        "cannot read: not readable as gzip (the data ends early: truncated)"
    )
    assert errors["empty.md.gz"].reason.startswith("cannot read: not readable as gzip")
    assert not any(e.skipped for e in errors.values())  # failures, reported as such


def test_a_file_that_expands_past_the_limit_is_refused_after_reading_that_much(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 64 * 1024
    monkeypatch.setattr("services.sources.site_pages.MAX_FILE_BYTES", limit)
    # 16 MiB of one byte compresses to ~16 KiB: a bomb in miniature.
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = bomb.compress(b"a" * (16 * 1024 * 1024)) + bomb.flush()
    assert len(data) < limit
    write(tmp_path, "bomb.md.gz", data)
    write(tmp_path, "fits.md.gz", gzip.compress(b"# Fits\n\n" + b"b" * (limit - 8)))
    docs, errors = load(tmp_path)
    assert list(docs) == ["fits.md.gz"]
    assert (
        errors["bomb.md.gz"].reason == f"cannot read: decompresses to over {limit} bytes, the limit"
    )


def test_the_limit_holds_across_members() -> None:
    member = gzip.compress(b"x" * 1000)
    assert len(page_bytes("a.md.gz", member * 3, 3000)) == 3000
    with pytest.raises(OSError, match="decompresses to over 2999 bytes"):
        page_bytes("a.md.gz", member * 3, 2999)
    assert page_bytes("a.md", b"as is", 1) == b"as is"  # not compressed: not touched


def test_a_compressed_page_counts_at_its_own_size(tmp_path: Path) -> None:
    text = " ".join(random.Random(3).choice(["alpha", "beta", "gamma"]) for _ in range(5000))
    path = write(tmp_path, "manual.txt.gz", gzip.compress(text.encode()))
    assert path.stat().st_size < len(text) // 3
    assert page_size(path) == len(text)
    assert page_size(write(tmp_path, "tiny.md.gz", b"\x1f\x8b")) == 0
    assert page_size(write(tmp_path, "plain.md", b"12345")) == 5
    os.mkfifo(tmp_path / "pipe.md.gz")  # replaced since the walk: not read, never waited on
    assert page_size(tmp_path / "pipe.md.gz") == 0
    os.symlink(path, tmp_path / "link.txt.gz")
    with pytest.raises(OSError):  # a link that replaced the file is not followed
        page_size(tmp_path / "link.txt.gz")


def test_a_single_page_edition_is_known_by_its_uncompressed_size(tmp_path: Path) -> None:
    # The Debian Reference ships as split HTML pages and one compressed text
    # of all of them; compressed, the text is smaller than the pages it holds.
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(3000)]
    bodies = {f"ch{i}": " ".join(rng.choice(vocabulary) for _ in range(9000)) for i in range(6)}
    for name, body in bodies.items():
        write(tmp_path, f"ref/{name}.html", f"<html><body><h1>{name}</h1><p>{body}</p>".encode())
    edition = "\n\n".join(f"{name}\n\n{body}" for name, body in bodies.items())
    write(tmp_path, "ref/reference.txt.gz", gzip.compress(edition.encode()))
    docs, errors = load(tmp_path)
    assert sorted(docs) == [f"ref/{name}.html" for name in sorted(bodies)]
    assert errors["ref/reference.txt.gz"].skipped
    assert errors["ref/reference.txt.gz"].reason.startswith("a single-page edition of")


def test_a_compressed_rendering_and_its_html_are_one_page(tmp_path: Path) -> None:
    prose = "Remove untracked files from the working tree, starting from the current directory."
    write(tmp_path, "git-clean.html", f"<html><body><h1>git-clean</h1><p>{prose}</p>".encode())
    write(tmp_path, "git-clean.md.gz", gzip.compress(f"# git-clean\n\n{prose}\n".encode()))
    docs, errors = load(tmp_path)
    assert list(docs) == ["git-clean.md.gz"]  # Markdown is kept over HTML, compressed or not
    assert errors["git-clean.html"].reason.startswith("the same page as git-clean.md.gz")


def _beir_lines(count: int) -> bytes:
    lines = (
        json.dumps({"_id": f"d{i}", "title": f"Title {i}", "text": f"Abstract {i}."})
        for i in range(count)
    )
    return "\n".join(lines).encode() + b"\n"


def test_a_compressed_beir_corpus_is_streamed(tmp_path: Path) -> None:
    path = write(tmp_path, "corpus.jsonl.gz", gzip.compress(_beir_lines(3)))
    items = list(load_beir_jsonl(path, scope_id="s"))
    assert [(d.doc_id, d.text) for d in items if isinstance(d, Document)] == [
        ("d0", "Abstract 0."),
        ("d1", "Abstract 1."),
        ("d2", "Abstract 2."),
    ]


def test_a_truncated_compressed_corpus_keeps_what_was_read_and_says_where_it_ended(
    tmp_path: Path,
) -> None:
    whole = gzip.compress(_beir_lines(2000))
    path = write(tmp_path, "corpus.jsonl.gz", whole[: len(whole) // 2])
    items = list(load_beir_jsonl(path, scope_id="s"))
    *documents, error = items
    assert documents and all(isinstance(d, Document) for d in documents)
    assert isinstance(error, LoadError)
    assert error.source == f"corpus.jsonl.gz:{len(documents) + 1}"
    assert error.reason.startswith(f"cannot read past line {len(documents)}: ")
    plain = write(tmp_path, "plain.jsonl.gz", _beir_lines(2))  # named .gz, not compressed
    (only,) = list(load_beir_jsonl(plain, scope_id="s"))
    assert isinstance(only, LoadError) and only.source == "plain.jsonl.gz:1"
    assert "Not a gzipped file" in only.reason


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=4),
    slack=st.integers(-2, 2),
)
def test_decompression_stops_at_the_limit_whatever_the_members(
    sizes: list[int], slack: int
) -> None:
    """Members of awkward sizes, the limit just under, at or just over their
    total: the page is returned whole exactly when it fits, never more bytes."""
    data = b"".join(gzip.compress(bytes([65 + i]) * size) for i, size in enumerate(sizes))
    total = sum(sizes)
    limit = max(1, total + slack)
    if total <= limit:
        assert len(page_bytes("p.md.gz", data, limit)) == total
    else:
        with pytest.raises(OSError, match=f"decompresses to over {limit} bytes"):
            page_bytes("p.md.gz", data, limit)


@pytest.mark.parametrize("name", ["corpus.jsonl.gz", "corpus.jsonl"])
def test_a_line_over_the_limit_is_refused_alone_without_being_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A few KB of gzip can hold one line of gigabytes: such a line is read
    past (in pieces of the limit), reported, and the lines after it load."""
    monkeypatch.setattr("services.sources.loaders.MAX_LINE_BYTES", 1000)
    record = {"_id": "long", "title": "t", "text": "x" * 5000}
    lines = [
        _beir_lines(1),
        json.dumps(record).encode() + b"\n",
        _beir_lines(2).splitlines(keepends=True)[1],
    ]
    data = b"".join(lines)
    items = list(
        load_beir_jsonl(
            write(tmp_path, name, gzip.compress(data) if name.endswith(".gz") else data),
            scope_id="s",
        )
    )
    assert [i.doc_id if isinstance(i, Document) else i.source for i in items] == [
        "d0",
        f"{name}:2",
        "d1",
    ]
    error = items[1]
    assert isinstance(error, LoadError)
    assert error.reason == "a line over 1000 bytes, the limit; not read"


def test_files_the_loader_does_not_read_are_reported_documents_first(tmp_path: Path) -> None:
    """Debian's /usr/share/doc/<package>: `MAILING-LIST`, `COMPAT.gz` and
    `inputrc.arrows` are not pages the loader reads; the report names the
    likeliest documents before the assets and says how many were left out."""
    write(tmp_path, "guide.md", b"# Guide\n\nText.\n")
    for name in ("a.png", "b.css", "c.js", "nginx/MAILING-LIST", "COMPAT.gz", "RBASH"):
        write(tmp_path, name, b"x")
    docs, errors = load(tmp_path)
    assert sorted(docs) == ["guide.md"]
    assert errors["."].skipped
    assert errors["."].reason.endswith(
        ": COMPAT.gz, RBASH, nginx/MAILING-LIST, a.png, b.css and 1 more"
    )
    assert errors["."].reason.startswith("6 file(s) not read")
