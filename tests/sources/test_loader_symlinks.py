"""The directory loader stays inside its folder: symbolic links, loops, FIFOs.

Regression for a link inside a docs folder to a system file, which made that
file searchable. Every case uses real links in a temporary folder.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from services.core.models import Document
from services.sources import site_loader, site_walk
from services.sources.loaders import LoadError, load_directory

pytestmark = pytest.mark.unit

SECRET = "root:x:0:0:secret"


def load(root: Path, *, follow: bool = False) -> tuple[dict[str, Document], dict[str, str]]:
    items = list(load_directory(root, scope_id="s", follow_symlinks=follow))
    docs = {i.doc_id: i for i in items if isinstance(i, Document)}
    errors = {i.source: i.reason for i in items if isinstance(i, LoadError)}
    assert not any(SECRET in d.text for d in docs.values())
    return docs, errors


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the docs, standing for /etc."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "passwd.md").write_text(SECRET, encoding="utf-8")
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "guide").mkdir(parents=True)
    (folder / "index.md").write_text("# Home\n\nWelcome.\n", encoding="utf-8")
    (folder / "guide" / "setup.md").write_text("# Setup\n\nSteps.\n", encoding="utf-8")
    return folder


def test_link_to_a_file_outside_is_skipped_and_never_followed(root: Path, outside: Path) -> None:
    (root / "notes.md").symlink_to(outside / "passwd.md")
    docs, errors = load(root)
    assert set(docs) == {"index.md", "guide/setup.md"}
    assert "symbolic link" in errors["notes.md"] and "--follow-symlinks" in errors["notes.md"]
    docs, errors = load(root, follow=True)
    assert set(docs) == {"index.md", "guide/setup.md"}
    assert "outside the folder, refused" in errors["notes.md"]


def test_link_to_a_folder_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "guide" / "etc").symlink_to(outside, target_is_directory=True)
    docs, errors = load(root)
    assert "symbolic link to a folder, skipped" in errors["guide/etc"]
    docs, errors = load(root, follow=True)
    assert "outside the folder, refused" in errors["guide/etc"]
    assert set(docs) == {"index.md", "guide/setup.md"}


def test_relative_dotdot_links_cannot_escape(root: Path, outside: Path) -> None:
    (root / "guide" / "up.md").symlink_to(Path("..", "..", "outside", "passwd.md"))
    (root / "parent").symlink_to(Path(".."), target_is_directory=True)
    docs, errors = load(root, follow=True)
    assert set(docs) == {"index.md", "guide/setup.md"}
    assert "refused" in errors["guide/up.md"] and "refused" in errors["parent"]


def test_links_inside_the_root_are_followed_only_with_the_flag(root: Path) -> None:
    (root / "start.md").symlink_to(Path("guide", "setup.md"))
    (root / "latest").symlink_to(Path("guide"), target_is_directory=True)
    docs, errors = load(root)
    assert set(docs) == {"index.md", "guide/setup.md"}
    assert set(errors) == {"start.md", "latest"}
    docs, errors = load(root, follow=True)
    assert errors == {}
    assert set(docs) == {"index.md", "guide/setup.md", "start.md", "latest/setup.md"}
    assert docs["start.md"].text == docs["guide/setup.md"].text  # read through the link


def test_link_loops_end_with_a_load_error(root: Path) -> None:
    (root / "guide" / "again").symlink_to(Path(".."), target_is_directory=True)  # to the root
    (root / "guide" / "self").symlink_to(Path("."), target_is_directory=True)
    (root / "a").mkdir()
    (root / "b").mkdir()
    (root / "a" / "to-b").symlink_to(Path("..", "b"), target_is_directory=True)
    (root / "b" / "to-a").symlink_to(Path("..", "a"), target_is_directory=True)
    (root / "b" / "page.md").write_text("B page.\n", encoding="utf-8")
    (root / "ping.md").symlink_to("pong.md")
    (root / "pong.md").symlink_to("ping.md")
    docs, errors = load(root, follow=True)
    assert {"index.md", "guide/setup.md", "b/page.md", "a/to-b/page.md"} <= set(docs)
    for source in ("guide/again", "guide/self", "a/to-b/to-a", "b/to-a/to-b", "ping.md"):
        assert "loop" in errors[source], source


def test_broken_link_fifo_and_hidden_links(root: Path, outside: Path) -> None:
    (root / "gone.md").symlink_to("missing.md")
    (root / ".private.md").symlink_to(outside / "passwd.md")
    (root / ".env").write_text(SECRET, encoding="utf-8")
    (root / "env.md").symlink_to(".env")  # a link does not unhide a hidden file
    os.mkfifo(root / "pipe.md")  # reading it would block forever
    docs, errors = load(root, follow=True)
    assert set(docs) == {"index.md", "guide/setup.md"}
    assert "broken symbolic link" in errors["gone.md"]
    assert "not a regular file" in errors["pipe.md"]
    assert "hidden" in errors["env.md"]
    assert ".private.md" not in errors and ".env" not in errors


def test_a_root_that_is_itself_a_link_is_read(root: Path, tmp_path: Path) -> None:
    (tmp_path / "current").symlink_to(root, target_is_directory=True)
    docs, errors = load(tmp_path / "current")
    assert set(docs) == {"index.md", "guide/setup.md"} and errors == {}


def test_links_that_fan_out_read_each_folder_once_through_links(root: Path) -> None:
    """Two links per level to the next level's folder, ten levels deep: every
    path through them would be 2^10 copies of the last page. Each folder is read
    once through links (the first link, in walk order); the others say so."""
    levels = [root / f"level{n}" for n in range(11)]
    for level in levels:
        level.mkdir()
    (levels[-1] / "leaf.md").write_text("# Leaf\n\nThe last page.\n", encoding="utf-8")
    for here, below in itertools.pairwise(levels):
        for name in ("x", "y"):
            (here / name).symlink_to(Path("..", below.name), target_is_directory=True)
    docs, errors = load(root, follow=True)
    leaves = [doc_id for doc_id in docs if doc_id.endswith("leaf.md")]
    assert "level10/leaf.md" in leaves
    assert len(leaves) == 2  # the folder itself, and once through a link
    assert len(docs) == 4  # index.md and guide/setup.md besides
    repeated = [source for source, reason in errors.items() if "already read through" in reason]
    assert len(repeated) >= 10


def test_a_folder_swapped_for_a_link_after_the_walk_is_not_followed(
    root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection (a labelled fake): the walk is real, then `guide/` is
    replaced by a link to an outside folder holding a `setup.md` before the
    pages are read, the race an attacker with write access to the docs
    folder would run. O_NOFOLLOW guards only the last name; the read must
    see that the file is not the one listed."""
    (outside / "setup.md").write_text(SECRET, encoding="utf-8")
    real_walk = site_loader.walk_site

    def walk_then_swap(*args: object, **kwargs: object) -> list[object]:
        listing = real_walk(*args, **kwargs)  # type: ignore[arg-type]
        (root / "guide").rename(root.parent / "guide-moved")
        (root / "guide").symlink_to(outside, target_is_directory=True)
        return listing  # type: ignore[return-value]

    monkeypatch.setattr(site_loader, "walk_site", walk_then_swap)
    docs, errors = load(root)  # asserts the secret is in no document
    assert set(docs) == {"index.md"}
    assert "changed since the folder was listed" in errors["guide/setup.md"]


def test_a_file_over_the_byte_limit_is_refused_before_it_is_read(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "huge.md").write_bytes(b"# Huge\n\n" + b"x" * 5000)
    monkeypatch.setattr(site_walk, "MAX_FILE_BYTES", 4096)
    docs, errors = load(root)
    assert set(docs) == {"index.md", "guide/setup.md"}
    assert "5008 bytes, limit is 4096" in errors["huge.md"]


def test_a_file_name_that_is_not_utf8_is_refused_by_name_and_the_rest_loads(
    root: Path,
) -> None:
    # Probe: the name reached the report as lone surrogates, and writing the
    # release record then crashed; the reason blamed the file's contents.
    os.mkdir(os.fsencode(root) + b"/caf\xe9")
    with open(os.fsencode(root) + b"/caf\xe9/menu.md", "w") as handle:
        handle.write("# Menu\n\nCoffee.\n")
    with open(os.fsencode(root) + b"/caf\xe9.md", "w") as handle:
        handle.write("# Cafe\n\nTea.\n")
    with open(os.fsencode(root) + b"/logo-\xe9.png", "wb") as handle:  # not a page: counted
        handle.write(b"\x89PNG")
    docs, errors = load(root)
    assert sorted(docs) == ["guide/setup.md", "index.md"]
    assert errors == {
        ".": "1 file(s) not read: not of a type the folder loader reads (docs/indexing.md, "
        '"Loading a folder"): logo-\\xe9.png',
        "caf\\xe9": "the file name is not UTF-8 text: rename it",
        "caf\\xe9.md": "the file name is not UTF-8 text: rename it",
    }
