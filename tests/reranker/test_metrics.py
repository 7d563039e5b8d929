"""The Reranker's Prometheus metrics, scraped over HTTP from a real app (gRPC
server, metrics listener, tiny cross-encoder) while real Rerank calls run.

Assertions are on counts and sums of pairs, never on durations."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.reranker.app import RerankerApp
from services.reranker.metrics import PARTIAL_REASONS
from services.reranker.servicer import SERVICE_NAME
from services.reranker.settings import RerankerSettings
from services.runtime.observability.telemetry import Telemetry
from services.runtime.settings import load_settings
from tests.reranker.texts import QUERY, passages
from tests.support.metrics import Scrape

pytestmark = pytest.mark.integration

BATCH_SIZE = 8
# Kept back from every call's deadline for the reply: large, so that a call
# whose scoring deadline is already past (or spent waiting) still gets its
# partial reply back in time on a busy machine.
SAFETY_MARGIN_S = 0.3
GENEROUS_S = 30.0

PAIRS = "rag_reranker_pairs_scored_total"
BATCH = "rag_reranker_batch_size"
BATCH_REQUESTS = "rag_reranker_batch_requests"
PARTIAL = "rag_reranker_partial_results_total"
QUEUE_WAIT = "rag_reranker_queue_wait_seconds"
LOADED = "rag_reranker_model_loaded"
HANDLED = "grpc_server_handled_total"


def rerank_ok(scrape: Scrape) -> float:
    return scrape.exact(
        HANDLED,
        grpc_type="unary",
        grpc_service=SERVICE_NAME,
        grpc_method="Rerank",
        grpc_code="OK",
    )


@dataclass
class Service:
    app: RerankerApp
    stub: reranker_pb2_grpc.RerankerStub

    async def scrape(self) -> Scrape:
        return await Scrape.fetch_async(self.app.telemetry.metrics_url)

    async def rerank(self, texts: list[str], timeout: float) -> Any:
        return await self.stub.Rerank(
            pb.RerankRequest(query=QUERY, passages=texts), timeout=timeout
        )


def settings_for(model: Path, cache: Path) -> RerankerSettings:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "rerank_model": str(model),
        "rerank_cache_dir": cache,
        "rerank_batch_size": BATCH_SIZE,
        "rerank_safety_margin_ms": SAFETY_MARGIN_S * 1000,
        "shutdown_grace_s": 0.5,
    }
    return load_settings(RerankerSettings, **values)


@asynccontextmanager
async def running(settings: RerankerSettings, *, load: bool) -> AsyncIterator[Service]:
    app = RerankerApp(settings, Telemetry("reranker", metrics_port=0), port=0)
    port = await app.open_port()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        if load:
            assert await app.load_model()
        yield Service(app, reranker_pb2_grpc.RerankerStub(channel))
    finally:
        await channel.close()
        await app.stop()


@pytest.fixture(scope="module")
async def service(tiny_model_dir: Path, onnx_cache: Path) -> AsyncIterator[Service]:
    async with running(settings_for(tiny_model_dir, onnx_cache), load=True) as started:
        yield started


async def test_model_loaded_is_1_only_once_the_model_is_warm(
    tiny_model_dir: Path, onnx_cache: Path
) -> None:
    async with running(settings_for(tiny_model_dir, onnx_cache), load=False) as cold:
        before = await cold.scrape()
        assert before.exact(LOADED) == 0
        # Every series exists from the start, so rate() never sees a gap.
        assert before.exact(PAIRS) == 0
        assert before.exact(f"{BATCH}_count") == 0
        assert before.exact(f"{BATCH_REQUESTS}_count") == 0
        assert before.exact(f"{QUEUE_WAIT}_count") == 0
        for reason in PARTIAL_REASONS:
            assert before.exact(PARTIAL, reason=reason) == 0
        assert await cold.app.load_model()
        assert (await cold.scrape()).exact(LOADED) == 1


async def test_a_model_that_fails_to_load_stays_0(tmp_path: Path, onnx_cache: Path) -> None:
    async with running(settings_for(tmp_path / "absent", onnx_cache), load=False) as broken:
        assert not await broken.app.load_model()
        assert (await broken.scrape()).exact(LOADED) == 0


async def test_scored_pairs_batches_and_queue_waits_are_counted(service: Service) -> None:
    sizes = [20, 5, 1]
    before = await service.scrape()
    for size in sizes:
        reply = await service.rerank(passages(size, chars=150), timeout=GENEROUS_S)
        assert (reply.scored, reply.partial) == (size, False)
    after = await service.scrape()

    def moved(name: str, **labels: str) -> float:
        return after.exact(name, **labels) - before.exact(name, **labels)

    assert moved(PAIRS) == sum(sizes)
    # With time to spare every batch is full but a request's last.
    assert moved(f"{BATCH}_count") == sum(math.ceil(size / BATCH_SIZE) for size in sizes)
    assert moved(f"{BATCH}_sum") == sum(sizes)
    assert moved(f"{BATCH}_bucket", le=str(float(BATCH_SIZE))) == moved(f"{BATCH}_count")
    # One call at a time: every batch holds pairs of one call only.
    assert moved(f"{BATCH_REQUESTS}_count") == moved(f"{BATCH}_count")
    assert moved(f"{BATCH_REQUESTS}_sum") == moved(f"{BATCH}_count")
    assert moved(f"{QUEUE_WAIT}_count") == len(sizes)
    assert rerank_ok(after) - rerank_ok(before) == len(sizes)
    for reason in PARTIAL_REASONS:
        assert moved(PARTIAL, reason=reason) == 0


async def test_a_deadline_already_past_counts_a_deadline_partial(service: Service) -> None:
    """A timeout shorter than the reply margin: the scoring deadline has passed
    on arrival, so nothing is scored and the model is not even asked for."""
    before = await service.scrape()
    reply = await service.rerank(passages(10, chars=150), timeout=SAFETY_MARGIN_S - 0.05)
    after = await service.scrape()
    assert (reply.scored, reply.partial, reply.stop_reason) == (0, True, "deadline")
    assert after.exact(PARTIAL, reason="deadline") - before.exact(PARTIAL, reason="deadline") == 1
    assert after.exact(PAIRS) == before.exact(PAIRS)
    assert after.exact(f"{QUEUE_WAIT}_count") == before.exact(f"{QUEUE_WAIT}_count")
    assert rerank_ok(after) - rerank_ok(before) == 1


async def test_waiting_out_the_deadline_for_the_model_counts_a_queue_timeout(
    service: Service,
) -> None:
    """While another call's batch holds the model (here: the test holds its
    lock), a call waits until its deadline, then replies with nothing scored."""
    before = await service.scrape()
    model_lock = service.app.scorer._model_lock
    assert model_lock.acquire(timeout=GENEROUS_S)
    try:
        reply = await service.rerank(passages(10, chars=150), timeout=SAFETY_MARGIN_S + 0.2)
    finally:
        model_lock.release()
    after = await service.scrape()
    assert (reply.scored, reply.partial, reply.stop_reason) == (0, True, "queue_timeout")

    def moved(name: str, **labels: str) -> float:
        return after.exact(name, **labels) - before.exact(name, **labels)

    assert moved(PARTIAL, reason="queue_timeout") == 1
    assert moved(PARTIAL, reason="deadline") == 0
    assert moved(f"{QUEUE_WAIT}_count") == 1  # the wait that timed out is observed too
    assert moved(PAIRS) == 0
    assert rerank_ok(after) - rerank_ok(before) == 1


async def test_concurrent_calls_sharing_forward_passes_are_counted(service: Service) -> None:
    """Calls that arrive while the model is held (as by a running batch) share
    its next forward pass: one batch of pairs from all of them, counted in
    `rag_reranker_batch_requests`; each reply is what the call gets alone."""
    texts = [passages(3, chars=150, seed=seed) for seed in range(4)]
    alone = [await service.rerank(t, timeout=GENEROUS_S) for t in texts]
    before = await service.scrape()
    scorer = service.app.scorer
    assert scorer._model_lock.acquire(timeout=GENEROUS_S)
    try:
        calls = [asyncio.ensure_future(service.rerank(t, timeout=GENEROUS_S)) for t in texts]
        while scorer.scheduling().waiting < len(texts):
            await asyncio.sleep(0.001)  # bounded by the calls' own timeout
    finally:
        scorer._model_lock.release()
    together = await asyncio.gather(*calls)
    after = await service.scrape()

    def moved(name: str, **labels: str) -> float:
        return after.exact(name, **labels) - before.exact(name, **labels)

    # 12 pairs in batches of 8: two pairs of each call, then the last of each.
    assert moved(f"{BATCH}_count") == 2 and moved(PAIRS) == 12
    assert moved(f"{BATCH_REQUESTS}_sum") == 2 * len(texts)
    assert moved(f"{BATCH_REQUESTS}_bucket", le="1.0") == 0
    for shared, single in zip(together, alone, strict=True):
        assert (shared.scored, shared.partial) == (3, False)
        np.testing.assert_allclose(shared.scores, single.scores, rtol=1e-5, atol=1e-5)
