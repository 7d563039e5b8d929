"""Document-level scoring and target verdicts of the evaluation harness."""

from __future__ import annotations

import math

import pytest

from bench.eval.metrics import distinct_documents, evaluate
from bench.reports.targets import Target

pytestmark = pytest.mark.unit


def test_a_document_is_ranked_by_its_best_chunk() -> None:
    assert distinct_documents(["d2", "d1", "d2", "d3", "d1"]) == ["d2", "d1", "d3"]


def test_metrics_follow_the_returned_order_not_the_document_ids() -> None:
    # trec_eval breaks score ties by document id; scores derived from ranks
    # must keep "z" (relevant) at rank 1 although it sorts last.
    result = evaluate({"q": {"z": 1}}, {"q": ["z", "a", "b"]})
    assert result["ndcg@10"] == 1.0 and result["mrr@10"] == 1.0


def test_known_values_and_queries_without_answers_count_as_zero() -> None:
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}}
    result = evaluate(qrels, {"q1": ["a", "x", "b"], "q2": []})
    ideal = 1 + 1 / math.log2(3)
    assert result["ndcg@10"] == round((1 + 1 / math.log2(4)) / ideal / 2, 4)
    assert result["recall@100"] == 0.5  # q1 finds both, q2 nothing
    assert result["mrr@10"] == 0.5
    assert result["hit_rate@5"] == 0.5
    assert result["precision@5"] == round(2 / 5 / 2, 4)


def test_target_verdicts_say_by_how_much_a_target_is_missed() -> None:
    p50 = Target("p50", 15.0, "at_most", " ms")
    assert p50.assess(12.0)["verdict"] == "met"
    missed = p50.assess(18.0)
    assert missed["met"] is False and missed["verdict"] == "missed by 3 ms (20% of the target)"
    share = Target("share", 0.8, "at_least")
    assert share.assess(0.6)["verdict"] == "missed by 0.2 (25% of the target)"
    assert share.assess(None)["verdict"] == "not measured"
