"""Retriever + the real Reranker serving the packaged ColBERT encoder
(answerai-colbert-small-v1, English), chosen by the one setting both services
read (RAG_RERANK_MODEL): the Retriever takes the rule fitted for it, orders
the scored candidates by their MaxSim, and leaves what the model cannot read
(Chinese pages, a Chinese question) where fusion put it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.embedding.embedder import Embedder
from services.embedding.packaged_files import COLBERT
from tests.reranker.stack import start_reranked_stack
from tests.retriever.test_packaged_rerank import QUESTION, doc_ids, documents
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    # Its own order over every candidate (fused weight 0, no gate), so the test
    # pins what the model reads and how its scores order the answer.
    rule = {"rerank_fused_weight": 0.0, "rerank_gate_margin": 0.0, "rerank_candidates": 20}
    root = tmp_path_factory.mktemp("colbert-rerank")
    retriever = {"rerank_model": COLBERT.alias, **rule, "rerank_budget_ms": 60_000}
    stack, _ = start_reranked_stack(
        root, embedder, COLBERT.alias, retriever=retriever, documents=documents()
    )
    yield stack
    stack.stop()


def test_the_scored_candidates_come_in_maxsim_order_and_chinese_ones_keep_their_places(
    stack: BackgroundStack,
) -> None:
    fused = doc_ids(stack.retrieve(QUESTION, top_k=10, disable_rerank=True))
    reply = stack.retrieve(QUESTION, top_k=10, timeout=120)
    assert reply.rerank.used and not reply.degraded, reply.rerank.reason
    assert reply.rerank.model == COLBERT.alias
    final = doc_ids(reply)
    chinese = [doc for doc in fused if doc.endswith("-zh")]
    for doc in chinese:
        assert final.index(doc) == fused.index(doc)
    scored = [hit for hit in reply.hits if hit.reranked]
    assert len(scored) == reply.rerank.reranked == len(fused) - len(chinese)
    scores = [hit.rerank_score for hit in scored]
    assert scores == sorted(scores, reverse=True)  # ranks, not just presence
    assert final[0] == scored[0].doc_id


def test_a_chinese_question_is_not_reordered(stack: BackgroundStack) -> None:
    question = "柏林有多少居民？"
    fused = stack.retrieve(question, top_k=10, disable_rerank=True)
    reply = stack.retrieve(question, top_k=10, timeout=120)
    assert doc_ids(reply) == doc_ids(fused)
    assert reply.rerank.reason.startswith("not reranked: the question is in zh")
