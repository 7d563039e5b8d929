"""Document-level retrieval quality with ir-measures (trec_eval's definitions).

A run is, per query, the ranked list of distinct document IDs a system
returned (a document's position is its best chunk's). ir-measures is given
scores derived from those ranks, so trec_eval's own tie-breaking (by
document ID) can never reorder what the system returned. Every judged query
counts: one for which a system returned nothing scores 0 on every measure,
where trec_eval alone would leave it out of the mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir_measures
from ir_measures import Measure

from bench.eval.dataset import Qrels

# Report name -> ir-measures measure. Hit rate@5 is trec_eval's success@5;
# hit@1 (a relevant document first) and top3 (one among the first 3) are
# success@1 and success@3: what a reader who looks at the first answer sees.
MEASURES: dict[str, Measure] = {
    "ndcg@10": ir_measures.nDCG @ 10,
    "recall@100": ir_measures.R @ 100,
    "mrr@10": ir_measures.RR @ 10,
    "hit@1": ir_measures.Success @ 1,
    "top3": ir_measures.Success @ 3,
    "hit_rate@5": ir_measures.Success @ 5,
    "precision@5": ir_measures.P @ 5,
}

Run = dict[str, list[str]]  # query id -> ranked, distinct document ids


def distinct_documents(doc_ids: Sequence[str]) -> list[str]:
    """Document IDs in order of first appearance: each document ranked by its best chunk."""
    return list(dict.fromkeys(doc_ids))


def evaluate(qrels: Qrels, run: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Mean of each measure over all judged queries (missing queries score 0)."""
    per_query = per_query_values(qrels, run)
    count = len(qrels)
    return {
        name: round(sum(values.get(q, 0.0) for q in qrels) / count, 4) if count else 0.0
        for name, values in per_query.items()
    }


def per_query_values(qrels: Qrels, run: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """measure name -> query id -> value, for the queries that returned something."""
    scored = {
        query_id: {doc_id: float(len(docs) - rank) for rank, doc_id in enumerate(docs)}
        for query_id, docs in run.items()
        if docs and query_id in qrels
    }
    names = {measure: name for name, measure in MEASURES.items()}
    values: dict[str, dict[str, float]] = {name: {} for name in MEASURES}
    for metric in ir_measures.iter_calc(list(MEASURES.values()), qrels, scored):
        values[names[metric.measure]][metric.query_id] = float(metric.value)
    return values
