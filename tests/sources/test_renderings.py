"""A page a folder holds in several renderings is loaded once.

Real files in a temporary folder, laid out as documentation packages ship
them: Sphinx's `_sources/*.rst.txt` beside its HTML, Markdown beside the HTML
generated from it in a parallel tree, git's AsciiDoc `.txt` beside its HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.core.models import Document
from services.sources.loaders import LoadError, load_directory
from services.sources.renderings import (
    SHARED_WORDS,
    PageWords,
    other_renderings,
    page_stem,
    words,
)

pytestmark = pytest.mark.unit

PROSE = (
    "Remember the results of an expensive function so that repeated calls with the same "
    "arguments return at once. The cache holds at most maxsize entries and drops the least "
    "recently used one when it is full; typed keeps arguments of different types apart."
)
CHINESE = "缓存昂贵函数的结果，相同参数的重复调用立即返回。"
OTHER = (
    "Frequently asked questions about the language: why indentation groups statements, "
    "how the garbage collector finds cycles, and where to report a problem in the tracker."
)


def html(title: str, body: str, lang: str = "en") -> str:
    return (
        f'<!doctype html><html lang="{lang}"><head><title>{title}</title>'
        "<script>var searchIndex = {functions: [1, 2, 3]};</script></head>"
        f"<body><nav>Navigation index modules next previous</nav><h1>{title}</h1>"
        f"<p>{body}</p></body></html>"
    )


def write(root: Path, relpath: str, text: str) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def load(root: Path, **options: bool) -> tuple[dict[str, Document], dict[str, LoadError]]:
    items = list(load_directory(root, scope_id="s", **options))
    docs = {i.doc_id: i for i in items if isinstance(i, Document)}
    skipped = {i.source: i for i in items if isinstance(i, LoadError)}
    return docs, skipped


@pytest.mark.parametrize(
    ("relpath", "stem"),
    [
        ("library/functools.html", "functools"),
        ("_sources/library/functools.rst.txt", "functools"),
        ("_sources/library/collections.abc.rst.txt", "collections.abc"),
        ("library/collections.abc.html", "collections.abc"),
        ("git-clean.txt", "git-clean"),
        ("docs/content/commands/npm-ci.md", "npm-ci"),
        ("notes.v2.txt", "notes.v2"),
        ("README.markdown", "README"),
        ("guide.rst", "guide"),
        ("guide.adoc", "guide"),
    ],
)
def test_a_page_stem_drops_the_format_and_a_source_markup_suffix(relpath: str, stem: str) -> None:
    assert page_stem(relpath) == stem


def test_sphinx_sources_beside_their_html_are_skipped_for_the_html(tmp_path: Path) -> None:
    write(tmp_path, "library/functools.html", html("functools", PROSE))
    write(tmp_path, "_sources/library/functools.rst.txt", f"functools\n=========\n\n{PROSE}\n")
    docs, skipped = load(tmp_path)
    assert list(docs) == ["library/functools.html"]
    error = skipped["_sources/library/functools.rst.txt"]
    assert error.skipped  # left out by rule: not a read failure
    assert error.reason == (
        "the same page as library/functools.html, which is indexed in its place "
        "(--all-renderings indexes both)"
    )


def test_markdown_is_kept_over_the_html_generated_from_it(tmp_path: Path) -> None:
    write(tmp_path, "docs/output/commands/npm-ci.html", html("npm-ci", PROSE))
    write(tmp_path, "docs/content/commands/npm-ci.md", f"# npm-ci\n\n{PROSE}\n")
    write(tmp_path, "docs/content/commands/npm-ci.txt", f"npm-ci\n\n{PROSE}\n")
    docs, skipped = load(tmp_path)
    assert list(docs) == ["docs/content/commands/npm-ci.md"]
    # The text file is skipped for the page kept, not for the HTML also skipped.
    assert {source: e.reason.split(",")[0] for source, e in skipped.items()} == {
        "docs/content/commands/npm-ci.txt": "the same page as docs/content/commands/npm-ci.md",
        "docs/output/commands/npm-ci.html": "the same page as docs/content/commands/npm-ci.md",
    }


def test_every_rendering_is_loaded_when_asked(tmp_path: Path) -> None:
    write(tmp_path, "git-clean.html", html("git-clean", PROSE))
    write(tmp_path, "git-clean.txt", f"git-clean(1)\n============\n\n{PROSE}\n")
    docs, skipped = load(tmp_path, all_renderings=True)
    assert sorted(docs) == ["git-clean.html", "git-clean.txt"] and not skipped


def test_pages_that_only_share_a_name_stay_apart(tmp_path: Path) -> None:
    write(tmp_path, "index.html", html("Contents", PROSE))
    write(tmp_path, "_sources/faq/index.rst.txt", f"FAQ\n===\n\n{OTHER}\n")
    write(tmp_path, "guide/setup.md", f"# Setup\n\n{PROSE}\n")
    write(tmp_path, "other/setup.md", f"# Setup\n\n{PROSE}\n")  # one format: never merged
    docs, skipped = load(tmp_path)
    assert sorted(docs) == [
        "_sources/faq/index.rst.txt",
        "guide/setup.md",
        "index.html",
        "other/setup.md",
    ]
    assert not skipped


def test_a_page_and_its_translation_are_not_one_rendering(tmp_path: Path) -> None:
    # Code and names alike, as in API docs: most English words of one are in the other.
    code = "lru_cache(maxsize=128, typed=False) cache_info() cache_clear() functools"
    write(tmp_path, "en/functools.md", f"# functools\n\n{code}\n\n{PROSE}\n")
    write(
        tmp_path,
        "zh-CN/functools.html",
        html(
            "functools", f"{code} 缓存昂贵函数的结果，相同参数的重复调用立即返回。 {PROSE}", "zh-CN"
        ),
    )
    docs, _ = load(tmp_path)
    assert sorted(docs) == ["en/functools.md", "zh-CN/functools.html"]


def test_a_skipped_rendering_is_no_translation_of_anything(tmp_path: Path) -> None:
    write(tmp_path, "en/guide.md", f"# Guide\n\n{PROSE}\n")
    write(tmp_path, "en/guide.html", html("Guide", PROSE))
    write(
        tmp_path, "zh-CN/guide.md", "# 指南\n\n缓存昂贵函数的结果，相同参数的重复调用立即返回。\n"
    )
    docs, skipped = load(tmp_path)
    assert sorted(docs) == ["en/guide.md", "zh-CN/guide.md"] and list(skipped) == ["en/guide.html"]
    linked = json.loads(docs["zh-CN/guide.md"].metadata["translations"])
    assert [t["doc_id"] for t in linked] == ["en/guide.md"]


def test_a_file_that_cannot_be_read_is_never_merged() -> None:
    readable = PageWords("en", words(PROSE))
    assert other_renderings(["a.html", "a.md"], {"a.html": readable}.get) == {}
    assert other_renderings(["a.html", "a.md"], {"a.html": readable, "a.md": readable}.get) == {
        "a.html": "a.md"
    }


def test_the_share_of_words_decides() -> None:
    kept = words(PROSE)
    few = frozenset(list(sorted(kept))[: int(len(kept) * (SHARED_WORDS - 0.1))])
    stranger = frozenset({"unrelated", "words", "entirely"})
    assert PageWords("en", kept).same_page(PageWords("en", kept | stranger))
    assert not PageWords("en", few | frozenset(f"x{i}" for i in range(len(few)))).same_page(
        PageWords("en", kept)
    )


def test_chinese_words_are_character_pairs() -> None:
    assert words("缓存结果 cache") == frozenset({"缓存", "存结", "结果", "cache"})
