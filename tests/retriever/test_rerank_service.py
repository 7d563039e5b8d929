"""Retriever + the real Reranker service: a loaded cross-encoder (a tiny one
built by the test: it proves mechanics, not quality) reorders the final
hits; a Reranker whose model is missing stays NOT_SERVING and Retrieve falls
back to the fused order, saying why."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.embedding.embedder import Embedder
from services.reranker.app import RerankerApp
from tests.reranker.stack import start_reranked_stack
from tests.support.stack import BackgroundStack
from tests.support.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.integration

QUERY = "what should clients do after status 429"


def start_with_reranker(
    root: Path, embedder: Embedder, model: str
) -> tuple[BackgroundStack, RerankerApp]:
    # The reranker's order alone (no blend with the fused rank, no gate): these tests
    # check that its scores order the hits, with a model that knows nothing.
    rule = {"rerank_candidates": 20, "rerank_fused_weight": 0.0, "rerank_gate_margin": 0.0}
    return start_reranked_stack(root, embedder, model, retriever=rule)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[BackgroundStack]:
    root = tmp_path_factory.mktemp("tiny-rerank")
    model = build_tiny_cross_encoder(root / "model")
    stack, _ = start_with_reranker(root, embedder, str(model))
    yield stack
    stack.stop()  # and its Reranker


def test_loaded_reranker_reorders_the_final_hits(tiny: BackgroundStack) -> None:
    fused = tiny.retrieve(QUERY, top_k=20, disable_rerank=True)
    reply = tiny.retrieve(QUERY, top_k=20)
    assert reply.rerank.used and not reply.rerank.fallback
    assert reply.rerank.reranked == reply.rerank.candidates == len(fused.hits)
    assert all(h.reranked for h in reply.hits)
    # `429` is an identifier: the best-reranked hit holding it leads (the
    # exact-identifier precedence holds after reranking too); the reranker
    # orders the rest.
    assert list(reply.hits[0].exact_identifiers) == ["429"]
    holders = [h.rerank_score for h in reply.hits if h.exact_identifiers]
    assert reply.hits[0].rerank_score == max(holders)
    rest = [h.rerank_score for h in reply.hits[1:]]
    assert rest == sorted(rest, reverse=True)
    assert [h.chunk_id for h in reply.hits] != [h.chunk_id for h in fused.hits]
    assert sorted(h.chunk_id for h in reply.hits) == sorted(h.chunk_id for h in fused.hits)
    assert "model" in reply.rerank.model


def test_reranker_without_model_is_not_serving_and_retrieve_falls_back(
    tmp_path: Path, embedder: Embedder
) -> None:
    stack, app = start_with_reranker(tmp_path, embedder, str(tmp_path / "no-such-model"))
    try:
        fused = stack.retrieve(QUERY, top_k=5, disable_rerank=True)
        replies = [stack.retrieve(QUERY, top_k=5) for _ in range(5)]
    finally:
        stack.stop()  # and its Reranker
    for reply in replies:
        assert [h.chunk_id for h in reply.hits] == [h.chunk_id for h in fused.hits]
        assert not reply.rerank.used and reply.rerank.fallback
        assert reply.rerank.reason.startswith("reranker not serving; skipped")
    # Its health said NOT_SERVING: the Retriever did not call it at all.
    handled = app.telemetry.rpc.handled.collect()[0].samples
    calls = [
        s for s in handled if s.name.endswith("_total") and s.labels["grpc_method"] == "Rerank"
    ]
    assert calls and sum(s.value for s in calls) == 0


def test_a_reranker_taking_fewer_passages_caps_what_the_retriever_sends(
    tmp_path: Path, embedder: Embedder
) -> None:
    """RAG_RERANK_CANDIDATES 20 against a Reranker taking 3 per call: once the
    Retriever has its limit (Info), it sends 3 and the answer is reranked,
    not refused. Started after the Retriever, the Reranker's limit is learnt
    from its first refusal."""
    model = build_tiny_cross_encoder(tmp_path / "model")
    rule = {"rerank_candidates": 20, "rerank_fused_weight": 0.0, "rerank_gate_margin": 0.0}
    stack, _ = start_reranked_stack(
        tmp_path, embedder, str(model), retriever=rule, reranker={"rerank_max_passages": 3}
    )
    try:
        replies = [stack.retrieve(QUERY, top_k=5)]
        while replies[-1].rerank.code != "reranked" and len(replies) < 50:
            time.sleep(0.1)
            replies.append(stack.retrieve(QUERY, top_k=5))
    finally:
        stack.stop()  # and its Reranker
    settled = replies[-1]
    assert settled.rerank.code == "reranked", [r.rerank.reason for r in replies[-3:]]
    assert settled.rerank.candidates == settled.rerank.reranked == 3
    assert not settled.rerank.fallback and not settled.degraded
    assert [h.reranked for h in settled.hits] == [True, True, True, False, False]
