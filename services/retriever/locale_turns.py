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
    placed: set[str] = set()
    for hit in hits:
        pending.append(hit)
        if hit.chunk.doc_id not in placed:
            placed.add(hit.chunk.doc_id)
            turns.append(pending)
            pending = []
    if pending and turns:
        turns[-1].extend(pending)
    return turns


def one_place_per_translation(
    hits: list[FusedHit], prefer: Callable[[str], bool]
) -> tuple[list[FusedHit], int]:
    """A page and its translation (linked by `metadata["translations"]`,
    services.core.translation_links) take one place between them, not two:
    the version in the reader's language (`prefer(locale)`; else the one
    ranked first) takes the better of their places, and the other versions'
    chunks follow every other hit. Returns the order and how many pages were
    moved back.

    Why: on a fully translated site the turns gave the second place to the
    first page's own translation on 11 of 27 same-language questions of a
    man-page site (zh-CN + en), and put the answer's translation above the
    answer on 3; the hit already links its other versions (`translations`),
    so the reader loses nothing. A page with no version in the question's
    language is never moved: crossing languages is unchanged."""
    group_of = _translation_groups(hits)
    keeper = _keepers(hits, group_of, prefer)
    moved_back = {doc for doc, group in group_of.items() if keeper.get(group, doc) != doc}
    if not moved_back:
        return hits, 0
    first_of: dict[str, int] = {}
    for i, hit in enumerate(hits):
        first_of.setdefault(hit.chunk.doc_id, i)
    placed: list[FusedHit] = []
    later: list[FusedHit] = []
    opened: set[str] = set()
    lifted: set[int] = set()
    for i, hit in enumerate(hits):
        doc = hit.chunk.doc_id
        group = group_of.get(doc)
        if group is not None and group not in opened:
            opened.add(group)
            first = first_of[keeper[group]]  # every group has two pages here, so a keeper
            if first != i:  # the kept version takes the group's first place
                placed.append(hits[first])
                lifted.add(first)
        if doc in moved_back:
            later.append(hit)
        elif i not in lifted:
            placed.append(hit)
    return placed + later, len(moved_back)


def _translation_groups(hits: list[FusedHit]) -> dict[str, str]:
    """doc_id → its group (the sorted ids of the pages linked to it, either
    way, among `hits`), for pages with at least one other version here.

    Links are followed both ways, and through other pages: a page's list may
    be cut at its size limit (`translations` holds at most so many
    characters, so on a site in many languages each page names only some of
    the others), and after a partial ingest one side may still name a page
    the other no longer names. Naming each page's group after its own list
    gave such pages groups of their own, with no page kept for them."""
    present = {h.chunk.doc_id for h in hits}
    parent: dict[str, str] = {}

    def root(doc: str) -> str:
        while parent.setdefault(doc, doc) != doc:
            parent[doc] = parent[parent[doc]]  # path halving
            doc = parent[doc]
        return doc

    for hit in hits:
        links = decode_translations(hit.chunk.metadata.get(TRANSLATIONS_KEY, ""))
        for other in {t.doc_id for t in links} & present - {hit.chunk.doc_id}:
            parent[root(other)] = root(hit.chunk.doc_id)
    members: dict[str, set[str]] = {}
    for doc in parent:
        members.setdefault(root(doc), set()).add(doc)
    return {doc: "\n".join(sorted(group)) for group in members.values() for doc in group}


def _keepers(
    hits: list[FusedHit], group_of: dict[str, str], prefer: Callable[[str], bool]
) -> dict[str, str]:
    """group → the doc_id that keeps a place: the first ranked in a preferred
    locale, else the first ranked."""
    members: dict[str, list[FusedHit]] = {}
    seen: set[str] = set()
    for hit in hits:
        group = group_of.get(hit.chunk.doc_id)
        if group is not None and hit.chunk.doc_id not in seen:
            seen.add(hit.chunk.doc_id)
            members.setdefault(group, []).append(hit)
    keeper: dict[str, str] = {}
    for group, docs in members.items():
        chosen = next((h for h in docs if prefer(h.chunk.locale)), docs[0])
        keeper[group] = chosen.chunk.doc_id
    return keeper
