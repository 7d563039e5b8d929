"""How the locales' ranked lists take turns (services.retriever.locale_balance,
step 3): one document a turn, in the order services.retriever.locale_order
decided."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TypeVar

from services.core.translation_links import TRANSLATIONS_KEY, decode_translations
from services.retriever.types import FusedHit

T = TypeVar("T")


def interleaved(lists: Sequence[list[T]]) -> list[T]:
    """Each list's 1st, then each list's 2nd, …; a list that runs out is skipped."""
    turns = itertools.zip_longest(*lists)
    return [hit for turn in turns for hit in turn if hit is not None]


def interleaved_documents(lists: Sequence[list[FusedHit]]) -> list[FusedHit]:
    """The locales' fused lists in turns of one document each: a turn places
    the list's next document not yet placed, after that list's further chunks
    of documents already placed that rank above it. Turns of one chunk let a
    page's second and third chunks take their locale's turns, and the
    per-document cap then dropped them: with one chunk per document, an
    English question over a mixed index got its best page, then three or four
    Chinese pages before its second English one."""
    return [hit for turn in interleaved([_document_turns(hits) for hits in lists]) for hit in turn]


def _document_turns(hits: list[FusedHit]) -> list[list[FusedHit]]:
    """`hits` cut after each chunk of a document new to the list (one list is
    one locale, and a document has one locale); chunks after the last new
    document join the last turn."""
    turns: list[list[FusedHit]] = []
    pending: list[FusedHit] = []
    placed: set[tuple[str, str]] = set()
    for hit in hits:
        pending.append(hit)
        if hit.page not in placed:
            placed.add(hit.page)
            turns.append(pending)
            pending = []
    if pending and turns:
        turns[-1].extend(pending)
    return turns


def one_place_per_translation(
    hits: list[FusedHit], prefer: Callable[[str], bool]
) -> tuple[list[FusedHit], int]:
    """A page and its translation (linked by `metadata["translations"]`,
    services.core.translation_links, either way; or one doc_id of the scope
    in two locales) take one place between them, not two: a version in
    another language than the reader's (`prefer(locale)` false) whose
    version in the reader's language is among the hits follows every other
    hit, and that version takes the better of their places. Returns the
    order and how many versions were moved back.

    Why: on a fully translated site the turns gave the second place to the
    first page's own translation on 11 of 27 same-language questions of a
    man-page site (zh-CN + en), and put the answer's translation above the
    answer on 3; the hit already links its other versions (`translations`),
    so the reader loses nothing. A page in the reader's language is never
    moved (several may name one translation: each is a page of its own), nor
    one with no version in it here: crossing languages is unchanged. Links
    are read one step, either way: a page's list may be cut at its size limit
    or one side stale after a partial ingest (groups keyed by each page's own
    list raised KeyError on such links, failing every Retrieve of the scope;
    groups closed over the links merged a whole chained site into one)."""
    first_of: dict[_Version, int] = {}
    for i, hit in enumerate(hits):
        first_of.setdefault(_version(hit), i)
    keeper_of = _keepers(hits, first_of, prefer)
    if not keeper_of:
        return hits, 0
    placed: list[FusedHit] = []
    later: list[FusedHit] = []
    lifted: set[int] = set()
    for i, hit in enumerate(hits):
        keeper = keeper_of.get(_version(hit))
        if keeper is None:
            if i not in lifted:
                placed.append(hit)
            continue
        first = first_of[keeper]
        if first > i and first not in lifted:  # the reader's version takes this place
            placed.append(hits[first])
            lifted.add(first)
        later.append(hit)
    return placed + later, len(keeper_of)


_Version = tuple[str, str, str]  # scope_id, doc_id, locale: one language version of a page


def _version(hit: FusedHit) -> _Version:
    return (hit.chunk.scope_id, hit.chunk.doc_id, hit.chunk.locale)


def _keepers(
    hits: list[FusedHit], first_of: dict[_Version, int], prefer: Callable[[str], bool]
) -> dict[_Version, _Version]:
    """Each version not in the reader's language → its best-ranked linked
    version in the reader's language, where one is among the hits."""
    by_page: dict[tuple[str, str], list[_Version]] = {}
    for version in first_of:
        by_page.setdefault(version[:2], []).append(version)
    linked: dict[_Version, set[_Version]] = {version: set() for version in first_of}
    for version in first_of:
        scope, doc, locale = version
        named = decode_translations(
            hits[first_of[version]].chunk.metadata.get(TRANSLATIONS_KEY, "")
        )
        for page in {doc} | {t.doc_id for t in named}:
            for other in by_page.get((scope, page), ()):
                if other[2] != locale:
                    linked[version].add(other)
                    linked[other].add(version)
    keeper_of: dict[_Version, _Version] = {}
    for version, others in linked.items():
        readers = [other for other in others if prefer(other[2])]
        if readers and not prefer(version[2]):
            keeper_of[version] = min(readers, key=first_of.__getitem__)
    return keeper_of
