"""Exact-identifier precedence on the query path.

RRF votes by rank. For `text-embedding-v4` the lexical channel ranks the one
chunk naming that model first, while the vector channel, which reads
"text embedding" as a topic, ranks it anywhere; two chunks that are merely
*about* embeddings, 2nd and 3rd in both lists, then outscore it. Which is why
a documented precedence sits on top of fusion: when the query contains
identifiers (see `services.core.analysis.identifiers`), hits holding more of
them come first, and RRF (or the reranker's) order decides within each group.
A query without identifiers is left exactly as RRF ranked it. The same rule
holds in the lexical channel itself (`lexical_fields.exact_first`); both
read it from `services.core.exact_match`.
Measured on the bilingual set and on SciFact (docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from enum import StrEnum

from services.core.exact_match import lead_holder, matched_identifiers
from services.retriever.types import FusedHit


def with_exact_matches(
    hits: Sequence[FusedHit],
    identifiers: tuple[str, ...],
    known: Mapping[str, tuple[str, ...]],
) -> list[FusedHit]:
    """Each hit with the query identifiers it holds. `known`: what the lexical
    store already found per chunk_id (the same function decides), so only
    the hits the vector channel alone found are examined here."""
    if not identifiers:
        return list(hits)
    return [
        dataclasses.replace(
            hit,
            exact=known[hit.chunk.chunk_id]
            if hit.chunk.chunk_id in known
            else matched_identifiers(hit.chunk, identifiers),
        )
        for hit in hits
    ]


class ExactPrecedence(StrEnum):
    """How hits holding the query's identifiers are placed (module docstring)."""

    OFF = "off"  # RRF (or rerank) order only
    LEAD = "lead"  # the best hit holding the most identifiers moves to rank 1
    TIERS = "tiers"  # every hit holding more identifiers before any holding fewer


def exact_precedence(hits: Sequence[FusedHit], rule: ExactPrecedence) -> list[FusedHit]:
    """`hits` reordered by `rule`; relative order is kept otherwise."""
    if rule is ExactPrecedence.TIERS:
        return sorted(hits, key=lambda hit: -len(hit.exact))  # stable
    if rule is ExactPrecedence.OFF:
        return list(hits)
    return lead_holder(hits)


def precedence_note(
    hits: Sequence[FusedHit], identifiers: tuple[str, ...], rule: ExactPrecedence
) -> str:
    if not identifiers or rule is ExactPrecedence.OFF:
        return ""
    holding = sum(1 for hit in hits if hit.exact)
    names = ", ".join(identifiers)
    if not holding:
        return f"exact identifier precedence ({rule.value}): no candidate holds {names}"
    placed = "the best of them leads" if rule is ExactPrecedence.LEAD else "they lead the order"
    return (
        f"exact identifier precedence ({rule.value}): {holding} candidate(s) hold {names}; {placed}"
    )
