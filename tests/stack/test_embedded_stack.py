"""End to end on the real embedded stack: real gRPC servers, Qdrant Edge,
tantivy and the packaged MiniLM model."""

from __future__ import annotations

import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.retriever.settings import RetrieverSettings
from tests.support.corpus import corpus_documents, url_of
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


def channel_ranks(hit: rpb.Hit) -> dict[int, int]:
    return {m.channel: m.rank for m in hit.channels}


def find(reply: rpb.RetrieveResponse, filename: str) -> rpb.Hit | None:
    return next((h for h in reply.hits if h.url == url_of(filename)), None)


def test_exact_identifier_found_by_bm25_that_vectors_miss_survives_fusion(
    embedded_stack: BackgroundStack,
) -> None:
    # Three chunk-size articles are semantically closer to "chunkSize" than the
    # release notes that actually contain the flag; with a channel depth of 3
    # the vector channel misses it and only BM25 brings it in.
    reply = embedded_stack.retrieve("chunkSize=800", candidates_per_channel=3, top_k=3)
    hit = find(reply, "release-notes.md")
    assert hit is not None, [h.url for h in reply.hits]
    assert channel_ranks(hit) == {rpb.CHANNEL_LEXICAL: 1}


def test_error_code_ranks_first(embedded_stack: BackgroundStack) -> None:
    reply = embedded_stack.retrieve("X7Q-4291", top_k=3)
    assert reply.hits[0].url == url_of("billing.md")
    assert channel_ranks(reply.hits[0]).get(rpb.CHANNEL_LEXICAL) == 1


def test_paraphrase_is_found_by_vectors_that_bm25_misses(embedded_stack: BackgroundStack) -> None:
    # No word of the query (after stemming) occurs in supervisor.md.
    reply = embedded_stack.retrieve(
        "keep my daemon alive when it dies", top_k=3, candidates_per_channel=5
    )
    hit = find(reply, "supervisor.md")
    assert hit is not None, [h.url for h in reply.hits]
    ranks = channel_ranks(hit)
    assert ranks.get(rpb.CHANNEL_VECTOR) == 1
    assert rpb.CHANNEL_LEXICAL not in ranks


# A question weighs the vector channel RAG_QUESTION_VECTOR_WEIGHT, a few words 1.
QUESTION_WEIGHT = RetrieverSettings.model_fields["question_vector_weight"].default


@pytest.mark.parametrize(
    ("query", "vector_weight"),
    [("how are rate limits enforced", QUESTION_WEIGHT), ("rate limits enforcement", 1.0)],
)
def test_fused_scores_follow_weighted_rrf_from_reported_ranks(
    embedded_stack: BackgroundStack, query: str, vector_weight: float
) -> None:
    reply = embedded_stack.retrieve(query, top_k=5)
    assert reply.hits
    weight = {rpb.CHANNEL_VECTOR: vector_weight, rpb.CHANNEL_LEXICAL: 1.0}
    for hit in reply.hits:
        expected = sum(weight[m.channel] / (60 + m.rank) for m in hit.channels)
        assert hit.fused_score == pytest.approx(expected, rel=1e-12)
    scores = [h.fused_score for h in reply.hits]
    assert scores == sorted(scores, reverse=True)


def test_the_answer_says_when_a_question_weighed_the_vector_channel_more(
    embedded_stack: BackgroundStack,
) -> None:
    question = embedded_stack.retrieve("how are rate limits enforced", top_k=3, debug=True)
    words = embedded_stack.retrieve("rate limits enforcement", top_k=3, debug=True)
    # "how" and "are": interrogatives count as function words (query_shape).
    said = f"vector weight {QUESTION_WEIGHT:g} for a question (5 words, 2 function words"
    assert any(note.startswith(said) for note in question.debug.notes), question.debug.notes
    assert not any("for a question" in note for note in words.debug.notes), words.debug.notes


def test_unreachable_reranker_keeps_fused_order_and_says_so(
    embedded_stack: BackgroundStack,
) -> None:
    reply = embedded_stack.retrieve("restore from snapshots", top_k=3)
    assert reply.hits
    assert not reply.rerank.used
    assert reply.rerank.fallback
    # Found absent at start-up: not called, re-checked with a backoff.
    assert reply.rerank.reason.startswith("reranker not serving; skipped")
    assert any(d.component == "reranker" for d in reply.degraded)
    assert [h.rank for h in reply.hits] == [1, 2, 3]
    assert not any(h.reranked for h in reply.hits)


def test_evidence_cites_every_hit(embedded_stack: BackgroundStack) -> None:
    reply = embedded_stack.retrieve("daily budget of requests", top_k=3)
    citations = reply.evidence.citations
    assert [c.number for c in citations] == list(range(1, len(citations) + 1))
    assert {c.chunk_id for c in citations} <= {h.chunk_id for h in reply.hits}
    assert "[1]" in reply.evidence.text


def test_data_survives_a_restart(tmp_path, embedder) -> None:
    first = BackgroundStack(tmp_path, embedder).start()
    try:
        first.upsert(corpus_documents())
        before = first.retrieve("X7Q-4291", top_k=3)
        stats_before = first.indexer.Stats(ipb.StatsRequest(), timeout=10)
    finally:
        first.stop()
    second = BackgroundStack(tmp_path, embedder).start()
    try:
        after = second.retrieve("X7Q-4291", top_k=3)
        stats_after = second.indexer.Stats(ipb.StatsRequest(), timeout=10)
        again = second.upsert(corpus_documents())
    finally:
        second.stop()
    assert [h.chunk_id for h in after.hits] == [h.chunk_id for h in before.hits]
    assert stats_after.chunks == stats_before.chunks > 0
    assert stats_after.vectors == stats_after.lexical_rows == stats_after.chunks
    assert again.counts.unchanged == len(corpus_documents())
