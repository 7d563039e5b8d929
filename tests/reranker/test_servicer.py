"""The Reranker over real gRPC: an in-process grpc.aio server on a free port,
with a cross-encoder built for the test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.reranker.app import RerankerApp
from services.reranker.servicer import SERVICE_NAME
from services.reranker.settings import RerankerSettings
from services.runtime.settings import load_settings
from tests.reranker.texts import QUERY, passages

pytestmark = pytest.mark.integration

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
MAX_CHARS = 200
MAX_PASSAGES = 64
SMALL_MAX_CHARS = 1000  # ~250 tokens: a call over MAX_PASSAGES takes about a second


@dataclass
class Service:
    app: RerankerApp
    stub: reranker_pb2_grpc.RerankerStub
    health: health_pb2_grpc.HealthStub

    async def status(self, service: str = SERVICE_NAME) -> int:
        reply = await self.health.Check(health_pb2.HealthCheckRequest(service=service))
        return int(reply.status)

    async def rerank(self, query: str, texts: list[str], timeout: float | None = None) -> Any:
        return await self.stub.Rerank(
            pb.RerankRequest(query=query, passages=texts), timeout=timeout
        )


def settings_for(model: Path, cache: Path, **overrides: Any) -> RerankerSettings:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "reranker_port": 0,
        "rerank_model": str(model),
        "rerank_cache_dir": cache,
        "rerank_max_passage_chars": MAX_CHARS,
        "rerank_max_passages": MAX_PASSAGES,
        "shutdown_grace_s": 0.5,
        **overrides,
    }
    return load_settings(RerankerSettings, **values)


@asynccontextmanager
async def running(settings: RerankerSettings, *, load: bool = True) -> AsyncIterator[Service]:
    app = RerankerApp(settings)
    port = await app.open_port()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        if load:
            await app.load_model()
        yield Service(
            app, reranker_pb2_grpc.RerankerStub(channel), health_pb2_grpc.HealthStub(channel)
        )
    finally:
        await channel.close()
        await app.stop()


@pytest.fixture(scope="module")
async def tiny(tiny_model_dir: Path, onnx_cache: Path) -> AsyncIterator[Service]:
    async with running(settings_for(tiny_model_dir, onnx_cache)) as service:
        yield service


@pytest.fixture(scope="module")
async def small(small_model_dir: Path, onnx_cache: Path) -> AsyncIterator[Service]:
    """Batches of two on a slower model: a call over many passages takes a
    while. ONNX, whose runs stop at the deadline even on a busy machine."""
    settings = settings_for(
        small_model_dir,
        onnx_cache,
        rerank_backend="onnx",
        rerank_batch_size=2,
        rerank_safety_margin_ms=50,
        rerank_max_passage_chars=SMALL_MAX_CHARS,
    )
    async with running(settings) as service:
        yield service


async def test_not_serving_until_the_model_is_warm(tiny_model_dir: Path, onnx_cache: Path) -> None:
    async with running(settings_for(tiny_model_dir, onnx_cache), load=False) as service:
        assert await service.status() == NOT_SERVING
        assert await service.status("") == NOT_SERVING
        info = await service.stub.Info(pb.InfoRequest())
        assert not info.loaded and info.reason == "not loaded yet"
        assert await service.app.load_model()
        assert await service.status() == SERVING
        assert await service.status("") == SERVING
        assert (await service.stub.Info(pb.InfoRequest())).loaded


async def test_missing_model_path_stays_not_serving_with_the_reason(
    tmp_path: Path, onnx_cache: Path
) -> None:
    async with running(settings_for(tmp_path / "absent", onnx_cache)) as service:
        assert await service.status() == NOT_SERVING
        # Never going to load: liveness says so too, so an orchestrator flags it.
        assert await service.status("liveness") == NOT_SERVING
        info = await service.stub.Info(pb.InfoRequest())
        assert not info.loaded
        assert "does not exist" in info.reason and str(tmp_path / "absent") in info.reason
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await service.rerank(QUERY, ["passage"])
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "does not exist" in str(raised.value.details())


async def test_info_reports_what_runs(tiny: Service, tiny_model_dir: Path) -> None:
    info = await tiny.stub.Info(pb.InfoRequest())
    assert info.model == str(tiny_model_dir)
    assert (info.backend, info.device, info.activation) == ("torch", "cpu", "none")
    assert (info.max_length, info.batch_size) == (128, 8)  # the packaged model's measured length
    assert (info.max_passages, info.max_passage_chars) == (MAX_PASSAGES, MAX_CHARS)
    assert info.loaded and info.reason == ""


async def test_scores_come_back_in_input_order(tiny: Service) -> None:
    texts = passages(10, chars=150)
    reply = await tiny.rerank(QUERY, texts)
    backward = await tiny.rerank(QUERY, texts[::-1])
    singles = [(await tiny.rerank(QUERY, [text])).scores[0] for text in texts]
    assert (reply.scored, reply.partial, reply.stop_reason) == (10, False, "")
    assert reply.model == tiny.app.scorer.model and reply.elapsed_ms > 0
    np.testing.assert_allclose(reply.scores, singles, atol=1e-4)
    np.testing.assert_allclose(reply.scores, list(backward.scores)[::-1], atol=1e-4)


@pytest.mark.parametrize(
    ("query", "texts", "detail"),
    [
        ("", ["p"], "query: is empty"),
        ("   ", ["p"], "query: is empty"),
        (QUERY, [], "passages: empty"),
        (
            QUERY,
            ["p"] * (MAX_PASSAGES + 1),
            f"passages: {MAX_PASSAGES + 1} given; at most {MAX_PASSAGES}",
        ),
    ],
)
async def test_bad_requests_are_invalid_argument(
    tiny: Service, query: str, texts: list[str], detail: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await tiny.rerank(query, texts)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert detail in str(raised.value.details())


async def test_over_long_passages_are_truncated_not_refused(tiny: Service) -> None:
    long_text = passages(1, chars=20 * MAX_CHARS)[0]
    whole = await tiny.rerank(QUERY, [long_text])
    cut = await tiny.rerank(QUERY, [long_text[:MAX_CHARS]])
    assert whole.scored == 1
    np.testing.assert_allclose(whole.scores, cut.scores, atol=1e-5)
    direct = tiny.app.scorer.score(QUERY, [long_text[: 4 * MAX_CHARS]])
    assert abs(direct.scores[0] - whole.scores[0]) > 1e-4  # the cut did change the input


async def test_short_deadline_returns_partial_scores_in_time(small: Service) -> None:
    """A timeout of the reply margin plus what the service predicts for a few
    batches (of the 32 the call needs): partial, with the count, and back before
    the deadline. The budget grows until one batch fits, so a loaded machine
    (a late worker thread, a slow first batch) cannot fail it; the contract
    is asserted on every reply."""
    texts = passages(MAX_PASSAGES, chars=SMALL_MAX_CHARS)
    planner = small.app.scorer.planner
    batch_ms = planner.cost.predict_ms(planner.tokens.padded_batch_tokens(QUERY, texts[:2]))
    assert batch_ms is not None
    scored_some = None
    for batches in (3, 6, 12, 24):
        timeout = (small.app.settings.rerank_safety_margin_ms + batches * batch_ms) / 1000
        started = time.monotonic()
        reply = await small.rerank(QUERY, texts, timeout=timeout)  # raises if the deadline passed
        assert time.monotonic() - started < timeout
        assert reply.partial and reply.stop_reason == "deadline"
        assert reply.scored < len(texts) and len(reply.scores) == reply.scored
        if reply.scored > 0:
            scored_some = reply
            break
    assert scored_some is not None, "no batch fitted even 24 predicted batches"
    prefix = await small.rerank(QUERY, texts[: scored_some.scored])
    np.testing.assert_allclose(scored_some.scores, prefix.scores, atol=1e-3)


async def test_event_loop_answers_while_the_model_computes(small: Service) -> None:
    scoring = asyncio.create_task(
        small.rerank(QUERY, passages(MAX_PASSAGES, chars=SMALL_MAX_CHARS))
    )
    await asyncio.sleep(0.05)
    info = await small.stub.Info(pb.InfoRequest())
    status = await small.status()
    assert info.loaded and status == SERVING
    assert not scoring.done()  # answered while the long call was still scoring
    assert (await scoring).scored == MAX_PASSAGES


async def test_concurrent_calls_get_their_own_scores(tiny: Service) -> None:
    queries = [f"{QUERY} {i}" for i in range(6)]
    texts = passages(16, chars=150)
    sequential = [list((await tiny.rerank(q, texts)).scores) for q in queries]
    replies = await asyncio.gather(*(tiny.rerank(q, texts) for q in queries))
    for reply, expected in zip(replies, sequential, strict=True):
        np.testing.assert_allclose(reply.scores, expected, atol=1e-4)


async def test_onnx_backend_ranks_like_torch(
    tiny: Service, tiny_model_dir: Path, onnx_cache: Path
) -> None:
    texts = passages(16, chars=150)
    settings = settings_for(tiny_model_dir, onnx_cache, rerank_backend="onnx")
    async with running(settings) as onnx:
        assert (await onnx.stub.Info(pb.InfoRequest())).backend == "onnx"
        onnx_scores = (await onnx.rerank(QUERY, texts)).scores
    torch_scores = (await tiny.rerank(QUERY, texts)).scores
    assert list(np.argsort(onnx_scores)) == list(np.argsort(torch_scores))
