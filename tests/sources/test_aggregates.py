"""A single-page edition of a folder's pages (Node's `api/all.html`, a GNU
manual's `bash.html` beside `html_node/`) is skipped; a long page that only
shares words with the others is not. Real files in a temporary folder."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from services.core.models import Document
from services.sources.aggregates import MIN_BYTES
from services.sources.loaders import LoadError, load_directory

pytestmark = pytest.mark.unit

VOCABULARY = [f"w{i}" for i in range(3000)]


def prose(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCABULARY) for _ in range(words))


def pages(count: int, words: int) -> dict[str, str]:
    """Pages big enough that their edition passes MIN_BYTES."""
    return {f"module{i}": prose(i, words) for i in range(count)}


def html(title: str, body: str) -> str:
    head = f"<head><title>{title}</title></head>"
    return f"<html>{head}<body><h1>{title}</h1><p>{body}</p></body></html>"


def write(root: Path, relpath: str, text: str) -> None:
    (root / relpath).parent.mkdir(parents=True, exist_ok=True)
    (root / relpath).write_text(text, encoding="utf-8")


def load(root: Path, **options: bool) -> tuple[list[str], dict[str, str]]:
    items = list(load_directory(root, scope_id="s", **options))
    docs = sorted(i.doc_id for i in items if isinstance(i, Document))
    return docs, {i.source: i.reason for i in items if isinstance(i, LoadError)}


def test_a_page_holding_every_page_of_its_folder_is_skipped(tmp_path: Path) -> None:
    modules = pages(6, 9000)
    for name, body in modules.items():
        write(tmp_path, f"api/{name}.html", html(name, body))
    edition = "".join(f"<h2>{name}</h2><p>{body}</p>" for name, body in modules.items())
    write(tmp_path, "api/all.html", html("All", edition))
    assert (tmp_path / "api/all.html").stat().st_size >= MIN_BYTES
    docs, skipped = load(tmp_path)
    assert docs == [f"api/{name}.html" for name in sorted(modules)]
    assert skipped["api/all.html"].startswith("a single-page edition of 3 or more other pages")
    assert "api/all.html" in load(tmp_path, all_renderings=True)[0]  # kept when asked


def test_a_manual_in_one_page_beside_its_split_pages_is_skipped(tmp_path: Path) -> None:
    nodes = pages(6, 9000)
    for name, body in nodes.items():
        write(tmp_path, f"bash/html_node/{name}.html", html(name, body))
    write(tmp_path, "bash/bash.html", html("Bash", " ".join(nodes.values())))
    docs, skipped = load(tmp_path)
    assert "bash/bash.html" in skipped and len(docs) == 6


def test_a_long_page_that_shares_only_words_with_the_others_stays(tmp_path: Path) -> None:
    # A changelog: every word of the pages is in it, but none of their passages.
    modules = pages(6, 9000)
    for name, body in modules.items():
        write(tmp_path, f"docs/{name}.md", f"# {name}\n\n{body}\n")
    words = " ".join(modules.values()).split()
    random.Random(7).shuffle(words)
    write(tmp_path, "docs/changelog.md", "# Changes\n\n" + " ".join(words) + "\n")
    assert (tmp_path / "docs/changelog.md").stat().st_size >= MIN_BYTES  # a candidate
    docs, skipped = load(tmp_path)
    assert "docs/changelog.md" in docs and not skipped


def test_a_long_page_among_unrelated_pages_stays(tmp_path: Path) -> None:
    for name, body in pages(4, 300).items():
        write(tmp_path, f"{name}.md", f"# {name}\n\n{body}\n")
    write(tmp_path, "reference.md", "# Reference\n\n" + prose(99, 60000) + "\n")
    assert (tmp_path / "reference.md").stat().st_size >= MIN_BYTES  # a candidate
    docs, skipped = load(tmp_path)
    assert "reference.md" in docs and not skipped
