"""Every row of the degradation matrix, on the real stack (real stores and
model) with faults injected around them: Retrieve answers OK with what the
matrix says, and never after the caller's deadline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.support.faults import HANG, RAISE
from tests.support.faulty_stack import Faults, faulty_stack
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

QUERY = "how do I restore the stores from snapshots"


@pytest.fixture(scope="module")
def faults(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[tuple[Faults, BackgroundStack]]:
    with faulty_stack(tmp_path_factory.mktemp("faults"), embedder) as running:
        yield running


@pytest.fixture
def f(faults: tuple[Faults, BackgroundStack]) -> Iterator[tuple[Faults, BackgroundStack]]:
    faults[0].reset()
    faults[1].forget_rerank_cost()  # what a slow Reranker taught it is not this test's
    yield faults
    faults[0].reset()


def timed(stack: BackgroundStack, timeout: float, **fields: Any) -> rpb.RetrieveResponse:
    """Ask with a gRPC deadline: a reply at all proves the Retriever answered
    within it (gRPC fails a late call with DEADLINE_EXCEEDED), with no
    wall-clock assertion of our own."""
    return stack.retrieve(QUERY, timeout=timeout, top_k=5, **fields)


def only_channel(reply: rpb.RetrieveResponse, channel: int) -> bool:
    return bool(reply.hits) and all(
        [m.channel for m in h.channels] == [channel] for h in reply.hits
    )


def components(reply: rpb.RetrieveResponse) -> dict[str, str]:
    return {d.component: d.reason for d in reply.degraded}


def codes(reply: rpb.RetrieveResponse) -> dict[str, str]:
    return {d.component: d.code for d in reply.degraded}


@pytest.mark.parametrize("mode", [RAISE, HANG])
def test_vector_store_down_or_slow_gives_lexical_only(f, mode: str) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    faults.vectors.mode = mode
    reply = timed(stack, 2.0)
    assert only_channel(reply, rpb.CHANNEL_LEXICAL)
    assert "vector" in components(reply)
    assert ("timeout" if mode == HANG else "error") in components(reply)["vector"]
    assert codes(reply)["vector"] == ("vector_timeout" if mode == HANG else "vector_error")


def test_embedding_down_gives_lexical_only_and_names_it(f) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    faults.embedder.mode = RAISE
    reply = timed(stack, 2.0, disable_rerank=True)
    assert only_channel(reply, rpb.CHANNEL_LEXICAL)
    assert "embedding" in components(reply)


@pytest.mark.parametrize("mode", [RAISE, HANG])
def test_lexical_store_down_or_slow_gives_vector_only(f, mode: str) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    faults.lexical.mode = mode
    reply = timed(stack, 2.0)
    assert only_channel(reply, rpb.CHANNEL_VECTOR)
    assert "lexical" in components(reply)


@pytest.mark.parametrize("mode", [RAISE, HANG])
def test_both_stores_down_gives_empty_ok_with_safe_message(f, mode: str) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    faults.vectors.mode = faults.lexical.mode = mode
    reply = timed(stack, 2.0)
    assert list(reply.hits) == []
    assert {"vector", "lexical"} <= set(components(reply))
    assert "temporarily unavailable" in reply.message


@pytest.mark.parametrize(("mode", "reason"), [("slow", "did not answer"), ("error", "INTERNAL")])
def test_reranker_slow_or_failing_keeps_fused_order(f, mode: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    fused = timed(stack, 5.0, disable_rerank=True)
    faults.reranker.mode = mode
    reply = timed(stack, 1.0)
    assert [h.chunk_id for h in reply.hits] == [h.chunk_id for h in fused.hits]
    assert not reply.rerank.used and reply.rerank.fallback
    assert reason in reply.rerank.reason
    code = "reranker_timeout" if mode == "slow" else "reranker_error"
    assert reply.rerank.code == codes(reply)["reranker"] == code


def test_reranker_reorders_when_it_answers(f) -> None:  # type: ignore[no-untyped-def]
    _, stack = f
    all_fused = stack.retrieve(QUERY, top_k=20, disable_rerank=True).hits
    reply = timed(stack, 5.0)
    assert reply.rerank.used and not reply.rerank.fallback
    assert reply.rerank.code == "reranked" and not reply.degraded
    assert reply.rerank.reranked == reply.rerank.candidates == len(all_fused)
    # The injector scores later passages higher: the candidate order flips.
    assert [h.chunk_id for h in reply.hits] == [h.chunk_id for h in all_fused][::-1][:5]
    assert all(h.reranked for h in reply.hits)


def test_partial_rerank_reorders_the_scored_prefix_only(f) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    fused = timed(stack, 5.0, disable_rerank=True)
    faults.reranker.mode, faults.reranker.partial_n = "partial", 2
    reply = timed(stack, 5.0)
    ids, fused_ids = [h.chunk_id for h in reply.hits], [h.chunk_id for h in fused.hits]
    assert ids[:2] == [fused_ids[1], fused_ids[0]]
    assert ids[2:] == fused_ids[2:]
    assert reply.rerank.used and reply.rerank.fallback and reply.rerank.reranked == 2
    assert "partial" in reply.rerank.reason
    assert reply.rerank.code == codes(reply)["reranker"] == "reranker_partial"


def test_short_caller_deadline_with_everything_slow_answers_in_time(f) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    timed(stack, 5.0, disable_rerank=True)  # warm the query-embedding cache
    faults.vectors.mode = faults.lexical.mode = HANG
    faults.reranker.mode = "slow"
    # Under the channel timeout (1 s) and under half the hang (2 s): only the
    # caller's deadline can end this request in time. Not shorter: embedding
    # and answering alone took over 0.5 s on a loaded 2-core CI machine.
    deadline = 0.8
    # An answer at all is the check: gRPC fails a call still running at its
    # deadline with DEADLINE_EXCEEDED (no wall-clock assertion of our own).
    reply = timed(stack, deadline)
    assert {"vector", "lexical"} <= set(components(reply))


def test_short_caller_deadline_with_slow_reranker_returns_fused_hits(f) -> None:  # type: ignore[no-untyped-def]
    faults, stack = f
    faults.reranker.mode = "slow"
    timed(stack, 5.0, disable_rerank=True)  # warm the query-embedding cache
    deadline = 0.5  # a quarter of the reranker's 2 s
    reply = timed(stack, deadline)  # answered, so within the deadline
    assert reply.hits
    assert reply.rerank.fallback and not reply.rerank.used


def test_health_not_serving_when_no_store_answers(f) -> None:  # type: ignore[no-untyped-def]
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    faults, stack = f
    faults.vectors.mode = faults.lexical.mode = RAISE
    monitor = stack.stack.retriever.monitor
    loop = stack._loop
    assert loop.run(monitor.check_once()) is False
    with grpc.insecure_channel(stack.retriever_addr) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    assert status.status == health_pb2.HealthCheckResponse.NOT_SERVING
    faults.reset()
    assert loop.run(monitor.check_once()) is True
