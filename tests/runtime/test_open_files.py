"""The open-file limit raised to fit the servers' connection bounds, and a
gRPC server that closes connections beyond its bound (services/runtime/open_files.py)."""

from __future__ import annotations

import asyncio
import resource
import socket

import pytest

from services.core.errors import ConfigError
from services.runtime.healthcheck import is_serving
from services.runtime.open_files import (
    RESERVED_DESCRIPTORS,
    release_connections,
    reserve_connections,
)
from services.runtime.server import LIVENESS_SERVICE, GrpcServer, ServerOptions


@pytest.mark.unit
def test_the_soft_limit_is_raised_to_fit_and_a_bound_past_the_hard_limit_is_refused() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    fits = hard - RESERVED_DESCRIPTORS
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 1024), hard))
        reserve_connections(fits, f"RAG_GRPC_MAX_CONNECTIONS={fits}")
        release_connections(fits)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
        with pytest.raises(ConfigError, match=f"RAG_GRPC_MAX_CONNECTIONS={fits + 1} needs"):
            reserve_connections(fits + 1, f"RAG_GRPC_MAX_CONNECTIONS={fits + 1}")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _closed_at_once(sock: socket.socket) -> bool:
    sock.settimeout(2.0)
    try:
        return sock.recv(64) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.integration
async def test_a_grpc_server_closes_connections_beyond_its_bound() -> None:
    # Before the bound, 20,000 idle connections to the Retriever's port took
    # every descriptor of the stack's process and broke its Indexer's writes.
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0, max_connections=16), ["t.v1.S"])
    await server.start()
    address = f"127.0.0.1:{server.port}"
    held: list[socket.socket] = []
    try:
        for _ in range(40):
            held.append(socket.create_connection(("127.0.0.1", server.port)))
        await asyncio.sleep(0.5)
        closed = await asyncio.to_thread(lambda: [_closed_at_once(s) for s in held[16:]])
        assert all(closed)  # the 24 past the bound
        assert not await asyncio.to_thread(_closed_at_once, held[0])  # within it: kept
        for sock in held:
            sock.close()
        held.clear()
        await asyncio.sleep(0.5)
        assert await asyncio.to_thread(is_serving, address, LIVENESS_SERVICE)
    finally:
        for sock in held:
            sock.close()
        await server.stop()
