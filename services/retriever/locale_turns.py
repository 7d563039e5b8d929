"""How the locales' ranked lists take turns (services.retriever.locale_balance,
step 3): one document a turn, in the order services.retriever.locale_order
decided."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TypeVar

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
