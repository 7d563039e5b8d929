"""Undecodable request bytes against a real GrpcServer: INVALID_ARGUMENT naming
the message type and a plain reason, one WARNING line, no grpc ERROR lines, for
every kind of method (unary and streaming, either way)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.retriever.servicer import SERVICE_NAME, RetrieverServicer
from services.runtime import request_decoding
from services.runtime.server import GrpcServer, ServerOptions

pytestmark = pytest.mark.integration

BAD_UTF8 = b"\x0a\x02\xff\xfe"  # field 1 (a string) holding invalid UTF-8
CORRUPT = b"\xff\xff\xff"  # not protobuf at all
RETRIEVE = f"/{SERVICE_NAME}/Retrieve"
ECHO = "/rag.test.v1.Echo/Count"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


class RecordingLog:
    """Stands in for the module's structlog logger and keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        def record(event: str, **fields: Any) -> None:
            self.calls.append((level, event, fields))

        return record


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> RecordingLog:
    log = RecordingLog()
    monkeypatch.setattr(request_decoding, "log", log)
    return log


async def _count(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
    n = sum([1 async for _ in requests])
    return health_pb2.HealthCheckResponse(status=n)


@pytest.fixture
async def address() -> AsyncIterator[str]:
    pipeline: Any = None  # never reached: decoding fails first
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0), [SERVICE_NAME])
    retriever_pb2_grpc.add_RetrieverServicer_to_server(
        RetrieverServicer(pipeline, default_deadline_ms=1000), server.server
    )
    echo = grpc.stream_unary_rpc_method_handler(
        _count,
        request_deserializer=health_pb2.HealthCheckRequest.FromString,
        response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
    )
    server.server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("rag.test.v1.Echo", {"Count": echo})]
    )
    port = await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop()


async def _raw_unary(address: str, method: str, payload: bytes) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(method)  # no serializer: the bytes go as they are
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(payload, timeout=5)
    return caught.value


def _grpc_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [(BAD_UTF8, "string field had bad UTF-8"), (CORRUPT, "wire format was corrupt")],
)
async def test_undecodable_unary_request_is_invalid_argument_with_one_warning(
    address: str,
    recorded: RecordingLog,
    caplog: pytest.LogCaptureFixture,
    payload: bytes,
    reason: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    error = await _raw_unary(address, RETRIEVE, payload)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        f"request could not be decoded as rag.retriever.v1.RetrieveRequest: {reason}"
    )
    assert "Error" not in (error.details() or "")  # no Python exception class
    assert recorded.calls == [
        (
            "warning",
            "request_undecodable",
            {
                "method": RETRIEVE,
                "message_type": "rag.retriever.v1.RetrieveRequest",
                "reason": reason,
            },
        )
    ]
    assert _grpc_errors(caplog) == []


async def test_server_streaming_method_is_guarded(address: str, recorded: RecordingLog) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        watch = channel.unary_stream("/grpc.health.v1.Health/Watch")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in watch(BAD_UTF8, timeout=5):
                pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "grpc.health.v1.HealthCheckRequest" in (caught.value.details() or "")
    assert [c[:2] for c in recorded.calls] == [("warning", "request_undecodable")]


async def test_client_streaming_method_is_guarded_and_good_streams_pass(
    address: str, recorded: RecordingLog
) -> None:
    good = health_pb2.HealthCheckRequest(service="x").SerializeToString()
    async with grpc.aio.insecure_channel(address) as channel:
        count = channel.stream_unary(
            ECHO, response_deserializer=health_pb2.HealthCheckResponse.FromString
        )
        reply = await count(iter([good, good]), timeout=5)
        assert reply.status == 2
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await count(iter([good, CORRUPT, good]), timeout=5)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [c[:2] for c in recorded.calls] == [("warning", "request_undecodable")]


async def test_bidirectional_stream_reflection_is_guarded(
    address: str, recorded: RecordingLog
) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        info = channel.stream_stream(REFLECTION)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in info(iter([CORRUPT]), timeout=5):
                pass
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(recorded.calls) == 1


async def test_well_formed_requests_are_untouched(address: str, recorded: RecordingLog) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        reply = await check(health_pb2.HealthCheckRequest(service="liveness"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    async with grpc.aio.insecure_channel(address) as channel:
        watch = channel.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        stream = watch(health_pb2.HealthCheckRequest(service="liveness"), timeout=5)
        first = await stream.read()
        stream.cancel()
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    assert recorded.calls == []
    async with grpc.aio.insecure_channel(address) as channel:
        info = channel.stream_stream(
            REFLECTION,
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = [r async for r in info(iter([ask]), timeout=5)]
    assert SERVICE_NAME in {s.name for s in answer.list_services_response.service}
    assert recorded.calls == []
