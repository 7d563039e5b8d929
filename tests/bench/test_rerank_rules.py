"""`bench.eval.rerank_rules`: a rule replayed offline orders a kept answer as
the Retriever would (scored prefix, gate, blend, identifier lead) and is
scored at document level."""

from __future__ import annotations

from typing import Any

import pytest

from bench.eval.rerank_rules import (
    GATES,
    NOISE,
    SERVABLE_CANDIDATES,
    Rule,
    cheapest_near_best,
    grid,
    model_files,
    score,
)
from services.embedding.packaged_files import COLBERT
from services.reranker.settings import DEFAULT_MODEL
from services.retriever.fusion import RerankBlend

pytestmark = pytest.mark.unit

# One kept answer: fused order a, b, c, d (doc, chunk, identifiers held); the
# cross-encoder read a, b and d (c was in a language it does not read).
ROW: dict[str, Any] = {
    "id": "q1",
    "split": "train",
    "hits": [["A", "a", 0], ["B", "b", 0], ["C", "c", 0], ["D", "d", 0]],
    "scores": {"a": 0.0, "b": 1.0, "d": 3.0},
}
RERANKER_ONLY = RerankBlend(0.0, 1.0, 1.0)


def test_fusion_alone_and_a_closed_gate_keep_the_fused_order() -> None:
    assert Rule(20, None).order(ROW) == ["A", "B", "C", "D"]
    gated = Rule(20, RerankBlend(0.0, 1.0, 1.0, gate=5.0))
    assert gated.order(ROW) == ["A", "B", "C", "D"]  # best 3.0 - first 0.0 < 5


def test_only_the_first_n_candidates_are_reordered_and_unscored_keep_their_place() -> None:
    assert Rule(4, RERANKER_ONLY).order(ROW) == ["D", "B", "C", "A"]
    assert Rule(2, RERANKER_ONLY).order(ROW) == ["B", "A", "C", "D"]  # d is beyond the head


def test_a_hit_holding_the_identifier_still_leads() -> None:
    row = {**ROW, "hits": [["A", "a", 0], ["B", "b", 1], ["C", "c", 0], ["D", "d", 0]]}
    assert Rule(4, RERANKER_ONLY).order(row) == ["B", "D", "C", "A"]


def test_scored_at_document_level_on_one_split() -> None:
    qrels = {"q1": {"D": 1}}
    assert score(Rule(20, None), [ROW], qrels, "train")["hit@1"] == 0.0
    assert score(Rule(4, RERANKER_ONLY), [ROW], qrels, "train")["hit@1"] == 1.0
    assert score(Rule(4, RERANKER_ONLY), [ROW], qrels, "test") == {
        "hit@1": 0.0,
        "mrr@10": 0.0,
        "ndcg@10": 0.0,
    }


def test_the_fewest_candidates_within_noise_of_the_best_gain_is_chosen() -> None:
    best, near, cheaper_far = (
        Rule(SERVABLE_CANDIDATES, RerankBlend(2.0, 1.0, 10.0, 8.0)),
        Rule(SERVABLE_CANDIDATES - 1, RerankBlend(2.0, 1.0, 10.0, 8.0)),
        Rule(SERVABLE_CANDIDATES - 2, RerankBlend(1.0, 1.0, 1.0, 4.0)),
    )
    ranked = [
        (False, 0.05, Rule(2, RERANKER_ONLY)),  # gains most, but worse somewhere: never
        (True, 0.04, Rule(SERVABLE_CANDIDATES + 1, RERANKER_ONLY)),  # not servable whole
        (True, 0.0133, best),
        (True, 0.0133 - NOISE / 2, near),
        (True, 0.0133 - 2 * NOISE, cheaper_far),
    ]
    assert cheapest_near_best(ranked) is near
    assert cheapest_near_best([(True, 0.0, best), (False, 0.1, near)]) is None


def test_another_input_length_has_its_own_dumps_and_fit_file() -> None:
    """Scores read at 256 tokens never mix with the model's own length's."""
    default_dumps = model_files(DEFAULT_MODEL)[0]
    long_dumps, long_fit = model_files(DEFAULT_MODEL, 256)
    assert long_dumps == default_dumps / "tokens-256"
    assert long_fit.name == "rerank-rules-fit-256-tokens.json"
    assert model_files(COLBERT.alias, 128)[1].name == (
        "rerank-rules-fit-answerai-colbert-small-v1-128-tokens.json"
    )


def test_each_model_has_its_own_dumps_fit_file_and_gates() -> None:
    """The default model's files keep their names; ColBERT's gates are in its
    own units (sums of cosines), far below the cross-encoder's logits."""
    default_dumps, default_fit = model_files(DEFAULT_MODEL)
    colbert_dumps, colbert_fit = model_files(COLBERT.alias)
    assert default_fit.name == "rerank-rules-fit.json"
    assert colbert_fit.name == "rerank-rules-fit-answerai-colbert-small-v1.json"
    assert colbert_dumps.parent == default_dumps
    assert max(GATES[COLBERT.alias]) < max(GATES[DEFAULT_MODEL])
    assert {rule.blend.gate for rule in grid(COLBERT.alias) if rule.blend} == set(
        GATES[COLBERT.alias]
    )
