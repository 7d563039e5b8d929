"""A connection whose handshake is slow (a busy peer, TLS over a long link)
still carries the call. gRPC gives a connection attempt at least
`grpc.min_reconnect_backoff_ms` (its minimum connect timeout); at 250 ms a
gateway search failed as 502 upstream_unavailable on a loaded 2-core machine,
the handshake with a healthy Retriever taking a little longer (make test
beside make run-check)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.runtime.security.client import ClientSecurity, aio_channel
from services.runtime.server import client_channel_options

pytestmark = pytest.mark.integration

HANDSHAKE_DELAY_S = 0.6  # past the former 250 ms, well within the call's deadline


@contextlib.asynccontextmanager
async def healthy_server() -> AsyncIterator[int]:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield port
    finally:
        await server.stop(None)


@contextlib.asynccontextmanager
async def slow_proxy(upstream_port: int) -> AsyncIterator[int]:
    """Fault injector: a TCP relay that holds each new connection's first
    bytes back for HANDSHAKE_DELAY_S, as a busy or distant peer would."""

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def accept(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(HANDSHAKE_DELAY_S)
        server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(relay(client_r, server_w), relay(server_r, client_w))

    proxy = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield proxy.sockets[0].getsockname()[1]
    finally:
        proxy.close()


async def test_a_slow_handshake_is_waited_for_within_the_calls_deadline() -> None:
    async with healthy_server() as port, slow_proxy(port) as slow_port:
        options = client_channel_options(1 << 20)
        async with aio_channel(f"127.0.0.1:{slow_port}", ClientSecurity(), options) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
