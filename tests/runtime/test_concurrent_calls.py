"""A gRPC server runs at most `max_concurrent_rpcs` calls at once; one more is
refused at once with RESOURCE_EXHAUSTED, not queued unseen (a probe: a
thousand queued calls each waited up to 30 s, their deadline counting only
from their handler's start), and the server takes calls again once a slot
frees."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from services.runtime.server import GrpcServer, ServerOptions

pytestmark = pytest.mark.integration

SERVICE = "rag.test.v1.Held"


class Held:
    """Fault injection: each call waits until the test releases it, so the
    server's slots stay taken as long as the test needs."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.running = 0

    async def hold(self, request: bytes, context: grpc.aio.ServicerContext) -> Any:
        self.running += 1
        await self.release.wait()
        return b"done"


@pytest.fixture
async def held_server() -> AsyncIterator[tuple[str, Held]]:
    held = Held()
    handler = grpc.unary_unary_rpc_method_handler(
        held.hold, request_deserializer=bytes, response_serializer=bytes
    )
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0, max_concurrent_rpcs=3), [])
    server.server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(SERVICE, {"hold": handler})]
    )
    port = await server.start()
    try:
        yield f"127.0.0.1:{port}", held
    finally:
        held.release.set()
        await server.stop()


async def test_a_call_beyond_the_bound_is_refused_at_once(held_server: tuple[str, Held]) -> None:
    address, held = held_server
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(f"/{SERVICE}/hold")
        taken = [asyncio.ensure_future(call(b"x", timeout=60)) for _ in range(3)]
        while held.running < 3:
            await asyncio.sleep(0.01)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(b"x", timeout=60)
        # Refused, not held: a queued call would end DEADLINE_EXCEEDED.
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        held.release.set()
        assert await asyncio.gather(*taken) == [b"done"] * 3
        assert await call(b"x", timeout=60) == b"done"  # a slot is free again
