"""Through a real GrpcServer and channel: a failure that says the machine is
short of a resource is UNAVAILABLE with the shortage named, not INTERNAL;
other failures of ours stay INTERNAL with nothing of their message sent. The
method raising them is a labelled fault injector."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

from services.core.errors import StoreError
from services.runtime.grpc_errors import unary
from services.runtime.server import GrpcServer, ServerOptions
from tests.core.test_errors import TANTIVY_EMFILE

pytestmark = pytest.mark.integration

FAULTS: dict[str, Exception] = {}


def _native_emfile() -> StoreError:
    try:
        try:
            raise ValueError(TANTIVY_EMFILE)
        except ValueError as native:
            raise StoreError(f"tantivy: upsert failed: {native}") from native
    except StoreError as wrapped:
        return wrapped


class FaultInjector:
    """Fault injector: its one method raises whatever FAULTS names for the request."""

    @unary
    async def Fail(self, request: Any, context: Any) -> Any:
        raise FAULTS[request.service]


@pytest.fixture
async def address() -> AsyncIterator[str]:
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0), ["rag.test.v1.Faults"])
    injector = FaultInjector()
    fail = grpc.unary_unary_rpc_method_handler(
        lambda request, context: injector.Fail(request, context),
        request_deserializer=health_pb2.HealthCheckRequest.FromString,
        response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
    )
    server.server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("rag.test.v1.Faults", {"Fail": fail})]
    )
    port = await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop()


async def _call(address: str, fault: Exception) -> grpc.aio.AioRpcError:
    FAULTS["case"] = fault
    async with grpc.aio.insecure_channel(address) as channel:
        method = channel.unary_unary(
            "/rag.test.v1.Faults/Fail",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await method(health_pb2.HealthCheckRequest(service="case"), timeout=5)
    return caught.value


async def test_out_of_descriptors_is_unavailable_and_names_it(address: str) -> None:
    error = await _call(address, _native_emfile())
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert error.details().startswith("the server is out of open file descriptors: send")


async def test_any_other_failure_of_ours_stays_internal_and_says_nothing(address: str) -> None:
    error = await _call(address, StoreError("tantivy: upsert failed: Schema mismatch"))
    assert (error.code(), error.details()) == (
        grpc.StatusCode.INTERNAL,
        "internal error (logged by the server)",
    )
