"""A single-page edition is not a page of its own.

Documentation often ships one page that holds every other page: Node's
`api/all.html` (3.0 M characters, every module's page in one), a GNU manual's
`bash.html` beside its `html_node/` pages, Sphinx's `singlehtml`. Indexed, it
answers every question a second time and takes a place among the first hits
that the page a reader wants should have; Node's is also over the Indexer's
document limit, so a folder ingest ended with a rejection.

So before a folder is read, each large file (`MIN_BYTES`, and at least
`SHARE_OF_BYTES` of the bytes of the files below its own folder, which an
edition of most of them must be) that has at least `MIN_PAGES` other files
below its folder is compared with them: when most
of them (`SHARE_OF_PAGES`) have nearly all their passages in it
(`CONTAINED`, over runs of `SHINGLE` words, so that a long changelog, whose
vocabulary holds most words of any page, is no edition), it is skipped by
name. Only files that can be read count; a folder of unrelated pages keeps
its long pages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from services.sources.renderings import word_runs

MIN_BYTES = 256 * 1024
MIN_PAGES = 3
SHARE_OF_PAGES = 0.5
SHARE_OF_BYTES = 0.3
CONTAINED = 0.8
SHINGLE = 5
# A page with fewer runs than this says too little to count either way.
MIN_SHINGLES = 20


TextOf = Callable[[str], str | None]


@dataclass(frozen=True)
class ListedFile:
    relpath: str
    size: int


def tokens(text: str) -> list[str]:
    """Lower-cased words in order; a run of Chinese, Japanese or Korean
    characters as its characters."""
    found: list[str] = []
    for run, cjk in word_runs(text):
        found.extend(run if cjk else (run,))
    return found


def shingles(text: str) -> frozenset[int]:
    words = tokens(text)
    return frozenset(hash(tuple(words[i : i + SHINGLE])) for i in range(len(words) - SHINGLE + 1))


def single_page_editions(files: Sequence[ListedFile], text_of: TextOf) -> dict[str, int]:
    """Each file that holds most of the pages below its folder → how many it
    holds. `text_of` reads a file's text as a reader sees it (None:
    unreadable); other files are read only when a large one is there."""
    editions: dict[str, int] = {}
    for candidate in (f for f in files if f.size >= MIN_BYTES):
        below = [f for f in files if f is not candidate and _below(f, candidate)]
        if len(below) < MIN_PAGES or candidate.size < SHARE_OF_BYTES * sum(f.size for f in below):
            continue
        text = text_of(candidate.relpath)
        if text is None:
            continue
        needed = max(MIN_PAGES, SHARE_OF_PAGES * len(below))
        held = _pages_held(shingles(text), [f.relpath for f in below], text_of, needed)
        if held >= needed:
            editions[candidate.relpath] = held
    return editions


def _pages_held(
    edition: frozenset[int], pages: Sequence[str], text_of: TextOf, needed: float
) -> int:
    """How many of `pages` the edition holds, counted until the verdict is
    known either way (`needed` reached, or out of reach)."""
    held = 0
    for index, page in enumerate(pages):
        text = text_of(page)
        own = shingles(text) if text is not None else frozenset()
        if len(own) >= MIN_SHINGLES and len(own & edition) >= CONTAINED * len(own):
            held += 1
        if held >= needed or held + len(pages) - index - 1 < needed:
            break
    return held


def _below(file: ListedFile, candidate: ListedFile) -> bool:
    folder = PurePosixPath(candidate.relpath).parent
    return folder == PurePosixPath(".") or folder in PurePosixPath(file.relpath).parents
