"""Rerank and Info with undecodable bytes, through the real Reranker server:
INVALID_ARGUMENT naming the message type, never UNKNOWN. (The request has no
enum fields; its strings and list are bounded by `InputLimits`.)"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.reranker.app import RerankerApp
from services.reranker.settings import RerankerSettings
from services.runtime.settings import load_settings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("method", "payload", "message"),
    [
        (
            "Rerank",
            b"\x12\x02\xff\xfe",  # passages[0]: bad UTF-8
            "request could not be decoded as rag.reranker.v1.RerankRequest: "
            "string field had bad UTF-8",
        ),
        (
            "Info",
            b"\x0a\x05ab",  # a length running past the end
            "request could not be decoded as rag.reranker.v1.InfoRequest: wire format was corrupt",
        ),
    ],
)
async def test_undecodable_requests_are_invalid_argument(
    tiny_model_dir: Path, tmp_path: Path, method: str, payload: bytes, message: str
) -> None:
    settings = load_settings(
        RerankerSettings,
        host="127.0.0.1",
        reranker_port=0,
        rerank_model=str(tiny_model_dir),
        rerank_cache_dir=tmp_path,
        shutdown_grace_s=0.5,
    )
    app = RerankerApp(settings)
    port = await app.open_port()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(f"/rag.reranker.v1.Reranker/{method}")
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call(payload, timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == message
        # A well-formed request still gets through.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            info = channel.unary_unary(
                "/rag.reranker.v1.Reranker/Info", response_deserializer=pb.InfoResponse.FromString
            )
            assert (await info(b"", timeout=10)).max_passages == settings.rerank_max_passages
    finally:
        await app.stop()
