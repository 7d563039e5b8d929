"""Scoring of the bilingual evaluation: what one Retrieve answer earns for
one query, and the means per query kind.

The figures answer three questions. Does the exact identifier come first
(hit@1 / exact@1: the rank-1 chunk's text contains `must_contain`)? Is a
relevant page within reach of a reader (top3, MRR@10, recall@10, judged per
document)? And does the lexical channel find anything at all for a query
(lexical_nonempty, from the debug report), which is what breaks first when
Chinese text is not tokenised into searchable terms?
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.eval.bilingual_data import IDENTIFIER_KINDS, KINDS, Query
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

TOP_K = 10
TOP_N = 3
TEXT_HEAD = 120
METRICS = ("hit@1", "exact@1", "top3", "mrr@10", "recall@10", "lexical_nonempty")
IDENTIFIER_GROUP = "identifier kinds"
ALL = "all"


@dataclass(frozen=True)
class Outcome:
    """One query's answer in one configuration, reduced to what is scored."""

    query: Query
    doc_ids: tuple[str, ...]  # the hits' documents, in rank order (a document may repeat)
    top_text: str  # the rank-1 hit's text ("" when nothing came back)
    lexical_hits: int | None  # None: the lexical channel was not part of the request
    error: str = ""  # the gRPC status when the call failed

    @property
    def exact1(self) -> bool | None:
        """The rank-1 chunk contains the identifier; None without one to look for."""
        if not self.query.must_contain:
            return None
        return self.query.must_contain.casefold() in self.top_text.casefold()

    @property
    def hit1(self) -> bool:
        if self.query.must_contain:
            return bool(self.exact1)
        return bool(self.doc_ids) and self.doc_ids[0] in self.query.relevant_docs

    @property
    def top3(self) -> bool | None:
        if not self.query.relevant_docs:
            return None
        return any(doc in self.query.relevant_docs for doc in self.doc_ids[:TOP_N])

    @property
    def reciprocal_rank(self) -> float | None:
        """1 / the rank of the first hit whose document is relevant (0 if none)."""
        if not self.query.relevant_docs:
            return None
        for rank, doc in enumerate(self.doc_ids[:TOP_K], 1):
            if doc in self.query.relevant_docs:
                return 1 / rank
        return 0.0

    @property
    def recall(self) -> float | None:
        """Share of the relevant documents among the top hits' distinct documents."""
        relevant = self.query.relevant_docs
        if not relevant:
            return None
        return len(relevant & set(self.doc_ids[:TOP_K])) / len(relevant)

    @property
    def lexical_nonempty(self) -> bool | None:
        return None if self.lexical_hits is None else self.lexical_hits > 0


def outcome(
    query: Query, response: pb.RetrieveResponse | None, lexical: bool, error: str = ""
) -> Outcome:
    """Reduce an answer; `lexical` says whether the request asked for that channel."""
    if response is None:
        return Outcome(query, (), "", 0 if lexical else None, error or "no response")
    hits = response.hits[:TOP_K]
    return Outcome(
        query,
        tuple(hit.doc_id for hit in hits),
        hits[0].text if hits else "",
        lexical_hit_count(response) if lexical else None,
    )


def lexical_hit_count(response: pb.RetrieveResponse) -> int:
    """Candidates the lexical channel returned, from the debug report (before
    fusion and the per-document cap); 0 when it failed or was skipped."""
    for report in response.debug.channels:
        if report.channel == pb.CHANNEL_LEXICAL:
            return report.hits if report.status == pb.CHANNEL_STATUS_OK else 0
    return 0


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Means of each metric over the queries it is defined for, with counts."""
    values: dict[str, list[float]] = {name: [] for name in METRICS}
    for o in outcomes:
        figures = {
            "hit@1": o.hit1,
            "exact@1": o.exact1,
            "top3": o.top3,
            "mrr@10": o.reciprocal_rank,
            "recall@10": o.recall,
            "lexical_nonempty": o.lexical_nonempty,
        }
        for name, value in figures.items():
            if value is not None:
                values[name].append(float(value))
    summary: dict[str, Any] = {"queries": len(outcomes), "exact_queries": len(values["exact@1"])}
    summary.update({name: _mean(v) for name, v in values.items()})
    return summary


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def group_metrics(outcomes: Sequence[Outcome]) -> dict[str, dict[str, Any]]:
    """Per kind (in KINDS order, kinds present only), both identifier kinds
    together (the exact-match target's population), and all queries."""
    groups = {kind: [o for o in outcomes if o.query.kind == kind] for kind in KINDS}
    groups = {kind: members for kind, members in groups.items() if members}
    identifiers = [o for o in outcomes if o.query.kind in IDENTIFIER_KINDS]
    if identifiers:
        groups[IDENTIFIER_GROUP] = identifiers
    groups[ALL] = list(outcomes)
    return {name: summarize(members) for name, members in groups.items()}


def failures(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """The queries that missed at rank 1, with what came first instead."""
    return [
        {
            "id": o.query.id,
            "kind": o.query.kind,
            "query": o.query.text,
            "must_contain": o.query.must_contain,
            "relevant": sorted(o.query.relevant_docs),
            "rank1_doc": o.doc_ids[0] if o.doc_ids else "",
            "rank1_text": " ".join(o.top_text.split())[:TEXT_HEAD],
            "relevant_in_top3": o.top3,
            "error": o.error,
        }
        for o in outcomes
        if not o.hit1
    ]


def per_query(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Every query's figures, so two variants can be compared query by query."""
    return [
        {
            "id": o.query.id,
            "rank1_doc": o.doc_ids[0] if o.doc_ids else "",
            "hit@1": o.hit1,
            "top3": o.top3,
            "rr": None if o.reciprocal_rank is None else round(o.reciprocal_rank, 4),
            "lexical_hits": o.lexical_hits,
        }
        for o in outcomes
    ]
