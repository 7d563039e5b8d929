"""One page, one document: a folder that ships a page in two renderings
indexes it once.

Documentation packages often hold each page twice: Sphinx's HTML beside its
reST source (`_sources/library/x.rst.txt`), git's HTML manual beside its
AsciiDoc (`git-x.txt`), npm's and Node's Markdown beside the HTML generated
from it. Indexed as they are, both copies compete for every question: on
the third-party questions with every rendering ingested, the top 3 held 2.3
distinct pages on average, and the copy that was not the page a reader opens
came first for a third of the questions (bench/results/notes/renderings.md).

So before a folder is read, files whose names differ only by a markup suffix
(`x.html`, `x.md`, `x.rst`, `x.rst.txt`) in corresponding folders are compared, and
when they are in one locale and most of the shorter one's words are in the
other (`SHARED_WORDS`) they are one page: the rendering the loader reads
with the most structure is kept (Markdown, then HTML, then plain text: a
reST or AsciiDoc source is read as text, its roles and directives as
written), the others are skipped by name. Files of
one format are never merged, nor files whose words differ: two pages that
merely share a name (`faq/index.rst.txt`, `index.html`), or a page and its
translation (`en/x.md`, `zh-CN/x.html`: code and names alike), stay apart.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from html import unescape
from pathlib import PurePosixPath

from services.core.analysis.scripts import CJK
from services.sources.compressed_pages import page_name

# Kept first: what the loader reads with structure (headings, code, tables),
# and of those the authored form over a generated page with its navigation.
PREFERENCE = {
    ".md": 0,
    ".markdown": 0,
    ".mdx": 0,
    ".html": 1,
    ".htm": 1,
    **dict.fromkeys((".txt", ".rst", ".adoc", ".asciidoc"), 2),
}
# Suffixes that name the markup of a source saved as text (`x.rst.txt`).
SOURCE_MARKUP = (
    ".rst", ".rest", ".adoc", ".asciidoc", ".md", ".markdown", ".mdx", ".textile", ".org",
)  # fmt: skip
# The share of the smaller rendering's words found in the other's. Measured
# on the third-party corpus (reST / AsciiDoc / Markdown against their HTML):
# 151 true pairs, lowest 0.61 (a short table of contents the HTML spells
# out); same-named different pages at most 0.44.
SHARED_WORDS = 0.6

_WORD = re.compile(r"\w+")
_INVISIBLE_HTML = re.compile(
    r"<(script|style|template|noscript)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL
)
_TAG = re.compile(r"<[^>]*>")
_CJK = re.compile(f"[{CJK}]")


@dataclass(frozen=True)
class PageWords:
    """What two renderings are compared by: the page's locale and its words."""

    locale: str
    words: frozenset[str]

    def same_page(self, other: PageWords) -> bool:
        return self.locale == other.locale and shared_share(self.words, other.words) >= SHARED_WORDS


WordsOf = Callable[[str], PageWords | None]


def page_stem(relpath: str) -> str:
    """The file name without its format and source-markup suffixes (and a `.gz`)."""
    name = page_name(PurePosixPath(relpath).name)
    suffix = PurePosixPath(name).suffix.lower()
    stem = name[: -len(suffix)] if suffix in PREFERENCE else name
    markup = PurePosixPath(stem).suffix.lower()
    return stem[: -len(markup)] if markup in SOURCE_MARKUP else stem


def rank_of(relpath: str) -> int:
    """Lower is kept first (see PREFERENCE); unknown formats last."""
    return PREFERENCE.get(PurePosixPath(page_name(relpath)).suffix.lower(), len(PREFERENCE))


def word_runs(text: str) -> Iterator[tuple[str, bool]]:
    """Lower-cased runs of word characters, each with whether it holds
    Chinese, Japanese or Korean (which has no spaces to split words on)."""
    for run in _WORD.findall(text.lower()):
        yield run, _CJK.search(run) is not None


def words(text: str) -> frozenset[str]:
    """Lower-cased words; a run of Chinese, Japanese or Korean characters as
    its character pairs."""
    found: set[str] = set()
    for run, cjk in word_runs(text):
        if cjk and len(run) > 1:
            found.update(run[i : i + 2] for i in range(len(run) - 1))
        else:
            found.add(run)
    return frozenset(found)


def visible_html_text(html: str) -> str:
    """The words an HTML page shows, roughly: scripts, styles and comments
    out, tags out, entities read. Enough to compare renderings; the page
    itself is loaded by the full conversion."""
    return unescape(_TAG.sub(" ", _INVISIBLE_HTML.sub(" ", html)))


def shared_share(first: frozenset[str], second: frozenset[str]) -> float:
    smaller = min(len(first), len(second))
    return len(first & second) / smaller if smaller else 0.0


def other_renderings(relpaths: Iterable[str], words_of: WordsOf) -> dict[str, str]:
    """Each file to skip → the file kept for its page. `words_of` reads a
    file's locale and words (None: unreadable, never merged); only files that share a
    stem with a file of another format are read."""
    by_stem: dict[str, list[str]] = defaultdict(list)
    for relpath in relpaths:
        by_stem[page_stem(relpath)].append(relpath)
    cache: dict[str, PageWords | None] = {}

    def cached(relpath: str) -> PageWords | None:
        if relpath not in cache:
            cache[relpath] = words_of(relpath)
        return cache[relpath]

    kept_for: dict[str, str] = {}
    for members in by_stem.values():
        if len({rank_of(m) for m in members}) > 1:
            kept_for.update(_merge_group(sorted(members, key=lambda m: (rank_of(m), m)), cached))
    return kept_for


def _merge_group(members: Sequence[str], words_of: WordsOf) -> dict[str, str]:
    """Within one stem, best rendering first: each file is matched with the
    best-aligned file of a more preferred format, and skipped for it (or for
    what that one is skipped for) when their words agree."""
    kept_for: dict[str, str] = {}
    for index, relpath in enumerate(members):
        better = [m for m in members[:index] if rank_of(m) < rank_of(relpath)]
        match = _same_page(relpath, aligned(relpath, better), words_of)
        if match is not None:
            kept_for[relpath] = kept_for.get(match, match)
    return kept_for


def _same_page(relpath: str, candidates: Sequence[str], words_of: WordsOf) -> str | None:
    own = words_of(relpath) if candidates else None
    if own is None:
        return None
    for candidate in candidates:
        other = words_of(candidate)
        if other is not None and own.same_page(other):
            return candidate
    return None


def aligned(relpath: str, candidates: Sequence[str]) -> list[str]:
    """The candidates whose folders correspond best to `relpath`'s: the most
    trailing folder names in common (`_sources/library` and `library`,
    `content/commands` and `output/commands`), then the most leading ones."""
    if not candidates:
        return []

    def score(candidate: str) -> tuple[int, int]:
        return _common(_folders(relpath)[::-1], _folders(candidate)[::-1]), _common(
            _folders(relpath), _folders(candidate)
        )

    best = max(score(c) for c in candidates)
    return [c for c in candidates if score(c) == best]


def _folders(relpath: str) -> tuple[str, ...]:
    return PurePosixPath(relpath).parent.parts


def _common(first: Sequence[str], second: Sequence[str]) -> int:
    count = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        count += 1
    return count
