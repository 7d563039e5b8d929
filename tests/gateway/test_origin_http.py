"""The gateway's own origin comes from configuration, never from the Host
header: a DNS-rebinding page (Origin and Host both its own name) is refused,
while the local page keeps working out of the box."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from tests.gateway.support import (
    ALLOWED_ORIGIN,
    SEARCH,
    RetrieverServer,
    gateway_settings,
    serve_gateway,
)

pytestmark = pytest.mark.integration

PUBLIC_ORIGIN = "https://search.example.com"


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


async def _status(url: str, origin: str, host: str | None = None) -> int:
    headers = {"Origin": origin}
    if host is not None:
        headers["Host"] = host
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{url}/v1/search", json=SEARCH, headers=headers)
    return response.status_code


async def test_dns_rebinding_origin_matching_the_host_header_is_refused(
    retriever: RetrieverServer,
) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        port = _port(gw.url)
        rebound = [
            await _status(gw.url, "http://evil.example", host="evil.example"),
            await _status(gw.url, f"http://evil.example:{port}", host=f"evil.example:{port}"),
        ]
    assert rebound == [403, 403]
    assert retriever.servicer.calls == 0


async def test_the_local_page_works_by_default_on_loopback_names_at_the_gateways_port(
    retriever: RetrieverServer,
) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        port = _port(gw.url)
        local = [
            await _status(gw.url, f"http://127.0.0.1:{port}"),
            await _status(gw.url, f"http://localhost:{port}", host=f"localhost:{port}"),
            await _status(gw.url, f"http://LOCALHOST:{port}"),
        ]
        elsewhere = [
            await _status(gw.url, f"http://127.0.0.1:{port + 1}"),  # another local server
            await _status(gw.url, f"https://localhost:{port}"),
            await _status(gw.url, "http://localhost"),
        ]
    assert local == [200, 200, 200]
    assert elsewhere == [403, 403, 403]


async def test_configured_public_origins_replace_the_loopback_default(
    retriever: RetrieverServer,
) -> None:
    settings = gateway_settings(retriever.addr, gateway_public_origins=[PUBLIC_ORIGIN + ":443"])
    async with serve_gateway(settings) as gw:
        port = _port(gw.url)
        public = await _status(gw.url, PUBLIC_ORIGIN, host="whatever.internal:8080")
        loopback = await _status(gw.url, f"http://127.0.0.1:{port}")
    strict = gateway_settings(
        retriever.addr, gateway_public_origins=[PUBLIC_ORIGIN], gateway_allow_same_origin=False
    )
    async with serve_gateway(strict) as gw:
        not_same = await _status(gw.url, PUBLIC_ORIGIN)
    assert public == 200  # ":443" is what the browser leaves out
    assert loopback == 403
    assert not_same == 403


async def test_two_origin_headers_are_refused_whichever_comes_first(
    retriever: RetrieverServer,
) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        own = f"http://127.0.0.1:{_port(gw.url)}"
        statuses = []
        async with httpx.AsyncClient(timeout=10) as client:
            for pair in ((own, "http://evil.example"), ("http://evil.example", own), (own, own)):
                headers = [("Origin", origin) for origin in pair]
                response = await client.post(f"{gw.url}/v1/search", json=SEARCH, headers=headers)
                statuses.append(response.status_code)
            single = await _status(gw.url, own)
    assert statuses == [403, 403, 403]
    assert single == 200
    assert retriever.servicer.calls == 1


async def test_readiness_is_readable_from_allowed_origins_only(retriever: RetrieverServer) -> None:
    """The widget on an allowed site reads /readyz (its release-gate notice);
    other origins get the answer without CORS headers, and a probe with no
    Origin is answered as before."""
    settings = gateway_settings(retriever.addr, gateway_allowed_origins=[ALLOWED_ORIGIN])
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        allowed = await client.get(f"{gw.url}/readyz", headers={"Origin": ALLOWED_ORIGIN})
        other = await client.get(f"{gw.url}/readyz", headers={"Origin": "https://evil.example"})
        probe = await client.get(f"{gw.url}/readyz")
    assert allowed.headers.get("access-control-allow-origin") == ALLOWED_ORIGIN
    assert "access-control-allow-origin" not in other.headers
    assert "access-control-allow-origin" not in probe.headers
    assert allowed.status_code == other.status_code == probe.status_code == 200
