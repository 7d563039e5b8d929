"""Connection limits through the gateway's own server (`GatewayApp`, real
uvicorn on a free port): a request head that does not arrive in time is cut
(408, or a silent close when nothing came), and connections beyond the bounds
are answered 503 at once, overall and per client, trusted proxies exempt
from the per-client bound. Before these limits one client holding partial
heads took every file descriptor of the gateway (gateway/connections.py)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from gateway.service import GatewayApp
from tests.gateway.support import RetrieverServer, gateway_settings

pytestmark = pytest.mark.integration

PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n"
WHOLE_HEAD = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"


@asynccontextmanager
async def running_gateway(
    retriever: RetrieverServer, **overrides: Any
) -> AsyncIterator[GatewayApp]:
    gateway = GatewayApp(gateway_settings(retriever.addr, **overrides), port=0)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop()


async def _connect(gateway: GatewayApp) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", gateway.server.port)


async def _read_until_closed(reader: asyncio.StreamReader, within_s: float = 5.0) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout=within_s)


def _refusals(gateway: GatewayApp, reason: str) -> float:
    value = gateway.app.state.metrics.registry.get_sample_value(
        "gateway_connections_refused_total", {"reason": reason}
    )
    return float(value or 0.0)


async def _healthz(gateway: GatewayApp) -> int:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{gateway.server.port}/healthz")
        return response.status_code


async def test_a_head_that_stops_arriving_is_answered_408_and_closed(
    retriever: RetrieverServer,
) -> None:
    async with running_gateway(retriever, gateway_header_timeout_s=0.5) as gateway:
        reader, writer = await _connect(gateway)
        writer.write(PARTIAL_HEAD)
        await writer.drain()
        answer = await _read_until_closed(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert answer.endswith(b"head_timeout\n")
        assert _refusals(gateway, "head_timeout") == 1.0
        assert await _healthz(gateway) == 200  # a whole head in time is served as before


async def test_a_connection_that_sends_nothing_is_closed_without_an_answer(
    retriever: RetrieverServer,
) -> None:
    async with running_gateway(retriever, gateway_header_timeout_s=0.5) as gateway:
        reader, writer = await _connect(gateway)
        assert await _read_until_closed(reader) == b""
        writer.close()
        assert _refusals(gateway, "head_timeout") == 0.0


async def test_the_next_head_on_a_kept_alive_connection_has_the_same_deadline(
    retriever: RetrieverServer,
) -> None:
    # uvicorn's keep-alive timer stops at the first byte of the next request;
    # without the head deadline a partial second head was held for ever.
    async with running_gateway(retriever, gateway_header_timeout_s=0.5) as gateway:
        reader, writer = await _connect(gateway)
        writer.write(WHOLE_HEAD)
        first = await asyncio.wait_for(reader.readuntil(b'{"status":"ok"}'), timeout=5)
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        writer.write(PARTIAL_HEAD)
        answer = await _read_until_closed(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")


async def test_one_client_holds_at_most_its_share_of_connections(
    retriever: RetrieverServer,
) -> None:
    settings = {"gateway_max_connections": 10, "gateway_max_connections_per_client": 3}
    async with running_gateway(retriever, **settings) as gateway:
        held = [await _connect(gateway) for _ in range(3)]
        for _, writer in held:
            writer.write(PARTIAL_HEAD)
        reader, writer = await _connect(gateway)
        answer = await _read_until_closed(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert b"retry-after: 1\r\n" in answer
        assert answer.endswith(b"too_many_client_connections\n")
        assert _refusals(gateway, "too_many_client_connections") == 1.0
        held.pop()[1].close()  # one of its connections ends: the client may open another
        await asyncio.sleep(0.1)
        assert await _healthz(gateway) == 200
        for _, held_writer in held:
            held_writer.close()


async def test_a_trusted_proxy_is_bounded_only_by_the_total(retriever: RetrieverServer) -> None:
    settings = {
        "gateway_max_connections": 3,
        "gateway_max_connections_per_client": 1,
        "gateway_forwarded_allow_ips": "127.0.0.1",
    }
    async with running_gateway(retriever, **settings) as gateway:
        held = [await _connect(gateway) for _ in range(3)]
        for _, writer in held:
            writer.write(PARTIAL_HEAD)
            await writer.drain()
        await asyncio.sleep(0.1)
        for held_reader, _ in held:
            assert not held_reader.at_eof()  # all three admitted past the per-client bound
        reader, writer = await _connect(gateway)
        answer = await _read_until_closed(reader)
        writer.close()
        assert answer.endswith(b"too_many_connections\n")
        assert _refusals(gateway, "too_many_connections") == 1.0
        for _, held_writer in held:
            held_writer.close()


async def test_a_client_that_stops_reading_is_cut_after_the_send_timeout(
    retriever: RetrieverServer,
) -> None:
    # The probe's finding: pipelined requests whose answers are never read
    # held each connection with no limit (the head deadline had stopped).
    settings = {"gateway_send_timeout_s": 1.0, "gateway_header_timeout_s": 60.0}
    async with running_gateway(retriever, **settings) as gateway:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", gateway.server.port))
        sock.sendall(b"GET /widget.js HTTP/1.1\r\nHost: gateway\r\n\r\n" * 200)
        await asyncio.sleep(3.0)  # never reading
        assert _refusals(gateway, "send_timeout") == 1.0
        assert gateway.server.ledger.total == 0  # the connection is gone
        sock.close()
        assert await _healthz(gateway) == 200


async def test_content_length_beside_chunked_closes_after_the_answer(
    retriever: RetrieverServer,
) -> None:
    # RFC 9112 §6.1. Kept open, the bytes after the chunked body were served as
    # a second request that a proxy framing by Content-Length never saw.
    async with running_gateway(retriever) as gateway:
        reader, writer = await _connect(gateway)
        writer.write(
            b"POST /healthz HTTP/1.1\r\nHost: gateway\r\nContent-Length: 40\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            b"GET /widget.js HTTP/1.1\r\nHost: gateway\r\n\r\n"
        )
        answer = await _read_until_closed(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 405 ")  # then closed: read to its end
        assert answer.count(b"HTTP/1.1 ") == 1  # the smuggled request went unanswered


async def test_protocol_misuse_leaves_no_traceback_and_no_warning_per_request(
    retriever: RetrieverServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_gateway(retriever) as gateway:
        # A request answered without its chunked body read, then a bad chunk
        # line: uvicorn's 400 could not be framed and logged a traceback.
        reader, writer = await _connect(gateway)
        writer.write(
            b"POST /healthz HTTP/1.1\r\nHost: gateway\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        writer.write(b"zz\r\n")
        await _read_until_closed(reader)
        writer.close()
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        caplog.clear()
        # An Upgrade this server does not speak: answered as plain HTTP/1.1,
        # without uvicorn's two warnings per request.
        reader, writer = await _connect(gateway)
        writer.write(
            b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n"
        )
        first = await asyncio.wait_for(reader.readuntil(b'{"status":"ok"}'), timeout=5)
        writer.close()
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.getMessage()[:80]) for r in errors] == []
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert [(r.name, r.getMessage()[:80]) for r in warnings] == []


async def test_a_head_over_the_limit_is_refused_whether_it_comes_whole_or_in_pieces(
    retriever: RetrieverServer,
) -> None:
    """One figure, RAG_GATEWAY_MAX_HEAD_BYTES, for both paths: the app's 431
    for a head that came whole, the parser's 400 (and a close) for one still
    arriving past it."""
    header = b"X-Note: " + b"a" * 9000 + b"\r\n"
    async with running_gateway(retriever, gateway_max_head_bytes=8192) as gateway:
        reader, writer = await _connect(gateway)
        writer.write(PARTIAL_HEAD + header + b"Connection: close\r\n\r\n")
        await writer.drain()
        whole = await _read_until_closed(reader)
        writer.close()
        reader, writer = await _connect(gateway)
        for piece in (PARTIAL_HEAD, header[:5000], header[5000:]):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.05)  # separate reads
        pieces = await _read_until_closed(reader)
        writer.close()
        assert await _healthz(gateway) == 200
    assert whole.startswith(b"HTTP/1.1 431 ")
    assert b'"headers_too_large"' in whole
    assert pieces.startswith(b"HTTP/1.1 400 ")
