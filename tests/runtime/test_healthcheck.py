"""The container health check against a real GrpcServer."""

from __future__ import annotations

import asyncio
import socket

import pytest

from services.runtime.healthcheck import is_serving, main
from services.runtime.server import LIVENESS_SERVICE, GrpcServer, ServerOptions

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_readiness_and_liveness_as_a_probe_sees_them() -> None:
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0), ["rag.test.v1.Probe"])
    await server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        # Started but not ready: alive, not serving.
        assert not await asyncio.to_thread(is_serving, address)
        assert await asyncio.to_thread(is_serving, address, LIVENESS_SERVICE)
        await server.set_serving(True)
        assert await asyncio.to_thread(main, [address]) == 0
        assert await asyncio.to_thread(main, [address, "rag.test.v1.Probe"]) == 0
        assert await asyncio.to_thread(main, [address, "no.such.Service"]) == 1
    finally:
        await server.stop()


def test_nothing_listening_is_unhealthy_and_usage_errors_say_so() -> None:
    assert main([f"127.0.0.1:{free_port()}"]) == 1
    assert main([]) == 2
