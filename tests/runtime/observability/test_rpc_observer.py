"""The call observer on a real grpc.aio server: every call counted and timed
under the status the client saw (OK, an abort's code, UNKNOWN for an
untranslated exception, UNAUTHENTICATED for an unknown caller), each
method's series present at 0 from the start, and the listener serving them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.reranker.servicer import METHOD_ROLES, SERVICE_NAME
from services.reranker.settings import RerankerSettings
from services.runtime.observability.telemetry import Telemetry
from services.runtime.security.server_security import ServerSecurity
from services.runtime.server import GrpcServer, ServerOptions
from tests.support.metrics import Scrape

pytestmark = pytest.mark.integration

RERANK = f"/{SERVICE_NAME}/Rerank"
INFO = f"/{SERVICE_NAME}/Info"


async def rerank_behaviour(request: pb.RerankRequest, context: grpc.aio.ServicerContext) -> object:
    """A test servicer (not a stand-in for the Reranker): its answer depends on the query."""
    if request.query == "bad":
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query: bad")
    if request.query == "crash":
        raise RuntimeError("untranslated")
    if request.query == "slow":
        await asyncio.sleep(5)
    return pb.RerankResponse(scores=[1.0])


async def stream_behaviour(
    request: pb.RerankRequest, context: grpc.aio.ServicerContext
) -> AsyncIterator[pb.RerankResponse]:
    """Replies big enough that the server waits on flow control between them."""
    for _ in range(10_000):
        yield pb.RerankResponse(scores=[1.0] * 50_000)


def scripted_handler() -> grpc.GenericRpcHandler:
    handlers = {
        "Rerank": grpc.unary_unary_rpc_method_handler(
            rerank_behaviour,
            request_deserializer=pb.RerankRequest.FromString,
            response_serializer=pb.RerankResponse.SerializeToString,
        ),
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream_behaviour,
            request_deserializer=pb.RerankRequest.FromString,
            response_serializer=pb.RerankResponse.SerializeToString,
        ),
    }
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


@pytest.fixture
async def served() -> AsyncIterator[tuple[GrpcServer, Telemetry]]:
    telemetry = Telemetry("reranker", metrics_port=0)
    server = GrpcServer(ServerOptions(port=0), [SERVICE_NAME], METHOD_ROLES, telemetry)
    server.server.add_generic_rpc_handlers((scripted_handler(),))
    await server.start()
    await server.set_serving(True)
    yield server, telemetry
    await server.stop()


HANDLED = "grpc_server_handled_total"
CALL = {"grpc_service": SERVICE_NAME, "grpc_type": "unary"}


def handled(scrape: Scrape, method: str, code: str) -> float:
    """KeyError when the series is not exported at all."""
    return scrape.exact(HANDLED, grpc_code=code, grpc_method=method, **CALL)


def rerank_method(channel: grpc.aio.Channel) -> grpc.aio.UnaryUnaryMultiCallable:
    return channel.unary_unary(
        RERANK,
        request_serializer=pb.RerankRequest.SerializeToString,
        response_deserializer=pb.RerankResponse.FromString,
    )


async def scrape(telemetry: Telemetry) -> Scrape:
    return await Scrape.fetch_async(telemetry.metrics_url)


async def test_every_call_is_counted_under_the_status_the_client_saw(
    served: tuple[GrpcServer, Telemetry],
) -> None:
    server, telemetry = served
    before = await scrape(telemetry)
    assert handled(before, "Info", "OK") == 0.0  # declared before any call
    assert handled(before, "Rerank", "OK") == 0.0
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        rerank = rerank_method(channel)
        await rerank(pb.RerankRequest(query="fine", passages=["x"]), timeout=5)
        await rerank(pb.RerankRequest(query="fine", passages=["x"]), timeout=5)
        for query, code in (("bad", "INVALID_ARGUMENT"), ("crash", "UNKNOWN")):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await rerank(pb.RerankRequest(query=query), timeout=5)
            assert caught.value.code().name == code
        health = health_pb2_grpc.HealthStub(channel)
        await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
    after = await scrape(telemetry)
    assert handled(after, "Rerank", "OK") == 2.0
    assert handled(after, "Rerank", "INVALID_ARGUMENT") == 1.0
    assert handled(after, "Rerank", "UNKNOWN") == 1.0
    assert after.exact("grpc_server_handling_seconds_count", grpc_method="Rerank", **CALL) == 4.0
    assert after.exact("grpc_server_started_total", grpc_method="Rerank", **CALL) == 4.0
    assert after.label_values("rag_service_info", "service") == {"reranker"}
    assert after.exact("rag_service_info", service="reranker", tracing="off") == 1.0


async def test_an_unknown_caller_is_counted_as_unauthenticated() -> None:
    callers = (
        '[{"name": "reader", "roles": ["reader"], "scopes": ["*"], "token_sha256": ["'
        + "0" * 64
        + '"]}]'
    )
    security = ServerSecurity.from_settings(RerankerSettings(auth_callers=callers))
    telemetry = Telemetry("reranker", metrics_port=0)
    options = ServerOptions(port=0, security=security)
    server = GrpcServer(options, [SERVICE_NAME], METHOD_ROLES, telemetry)
    server.server.add_generic_rpc_handlers((scripted_handler(),))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            rerank = rerank_method(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await rerank(pb.RerankRequest(query="fine"), timeout=5)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert handled(await scrape(telemetry), "Rerank", "UNAUTHENTICATED") == 1.0
    finally:
        await server.stop()


async def test_a_passed_deadline_and_a_client_gone_are_told_apart(
    served: tuple[GrpcServer, Telemetry],
) -> None:
    server, telemetry = served
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        rerank = rerank_method(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await rerank(pb.RerankRequest(query="slow"), timeout=0.2)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        stream = channel.unary_stream(
            f"/{SERVICE_NAME}/Stream",
            request_serializer=pb.RerankRequest.SerializeToString,
            response_deserializer=pb.RerankResponse.FromString,
        )
        for _ in range(2):  # the client leaves while the server waits to send
            call = stream(pb.RerankRequest(query="x"), timeout=30)
            async for _reply in call:
                await asyncio.sleep(0.2)
                call.cancel()
                break
    for _ in range(200):  # the server notices both a moment later
        now = await scrape(telemetry)
        stream_cancelled = {"grpc_code": "CANCELLED", "grpc_method": "Stream"}
        if (
            now.value(HANDLED, grpc_code="DEADLINE_EXCEEDED", grpc_method="Rerank") == 1.0
            and now.value(HANDLED, grpc_type="server_stream", **stream_cancelled) == 2.0
        ):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(now.samples)
