"""A port is one server's: a second bind on it is a configuration error."""

from __future__ import annotations

import pytest

from services.core.errors import ConfigError
from services.runtime.server import GrpcServer, ServerOptions

pytestmark = pytest.mark.integration


async def test_a_second_server_on_a_taken_port_is_refused_by_name() -> None:
    first = GrpcServer(ServerOptions(host="127.0.0.1", port=0), ["rag.test.v1.First"])
    await first.start()
    try:
        second = GrpcServer(
            ServerOptions(host="127.0.0.1", port=first.port), ["rag.test.v1.Second"]
        )
        try:
            with pytest.raises(ConfigError) as refused:
                await second.start()
        finally:
            await second.stop()  # had it started (the fault), the test still ends
        assert f"cannot listen on 127.0.0.1:{first.port}" in str(refused.value)
    finally:
        await first.stop()


async def test_an_ipv6_host_is_bound_without_brackets_in_the_setting() -> None:
    """RAG_HOST=::1 failed with 'Failed to bind to address ::1:port'."""
    server = GrpcServer(ServerOptions(host="::1", port=0), ["rag.test.v1.Six"])
    try:
        assert await server.start() > 0
    finally:
        await server.stop()
