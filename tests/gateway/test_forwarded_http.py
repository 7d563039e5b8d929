"""X-Forwarded-For counts only from a configured proxy: a caller rotating it
does not escape its rate limit; behind a trusted proxy, the right-most
address that is not a trusted proxy is the client."""

from __future__ import annotations

import ipaddress
from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
import structlog

from gateway.clientip import client_address, parse_address
from tests.gateway.support import (
    ALLOWED_ORIGIN,
    SEARCH,
    RetrieverServer,
    gateway_settings,
    serve_gateway,
)


async def _rotate(
    retriever: RetrieverServer, chains: list[str], **overrides: Any
) -> tuple[list[int], list[str]]:
    """POST once per X-Forwarded-For value; the statuses and the client each
    search was counted under (raw log retention names it)."""
    settings = gateway_settings(
        retriever.addr,
        gateway_rate_limit="3/hour",
        gateway_query_log_retention="raw",
        **overrides,
    )
    statuses = []
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        with structlog.testing.capture_logs() as logs:
            for chain in chains:
                headers = {"Origin": ALLOWED_ORIGIN, "X-Forwarded-For": chain}
                response = await client.post(f"{gw.url}/v1/search", json=SEARCH, headers=headers)
                statuses.append(response.status_code)
    return statuses, _clients(logs)


def _clients(logs: list[MutableMapping[str, Any]]) -> list[str]:
    return [str(entry.get("client")) for entry in logs if entry.get("event") == "search"]


@pytest.mark.integration
async def test_rotating_x_forwarded_for_from_an_untrusted_peer_does_not_bypass_the_limit(
    retriever: RetrieverServer,
) -> None:
    # The default trusts no proxy, not even loopback (the test client's address).
    statuses, clients = await _rotate(retriever, [f"198.51.100.{i}" for i in range(12)])
    assert statuses == [200] * 3 + [429] * 9
    assert set(clients) == {"127.0.0.1"}
    assert retriever.servicer.calls == 3


@pytest.mark.integration
async def test_a_trusted_proxy_names_the_client(retriever: RetrieverServer) -> None:
    chains = [f"198.51.100.{i}" for i in range(6)] + ["198.51.100.0"] * 3
    statuses, clients = await _rotate(retriever, chains, gateway_forwarded_allow_ips=["127.0.0.1"])
    assert statuses == [200] * 8 + [429]  # six clients; the first one's fourth is refused
    assert clients[:6] == [f"198.51.100.{i}" for i in range(6)]


@pytest.mark.integration
async def test_the_right_most_untrusted_address_is_the_client_not_the_left_most(
    retriever: RetrieverServer,
) -> None:
    # The client writes whatever it likes on the left; the proxies append on the right.
    chains = [f"192.0.2.{i}, 203.0.113.7, 10.1.2.3" for i in range(5)]
    statuses, clients = await _rotate(
        retriever, chains, gateway_forwarded_allow_ips=["127.0.0.1", "10.0.0.0/8"]
    )
    assert statuses == [200] * 3 + [429] * 2
    assert set(clients) == {"203.0.113.7"}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("peer", "header", "expected"),
    [
        ("203.0.113.9", ["198.51.100.1"], "203.0.113.9"),  # untrusted peer: header ignored
        ("127.0.0.1", [], "127.0.0.1"),  # a trusted proxy's own request
        ("127.0.0.1", ["198.51.100.1, 10.0.0.5"], "198.51.100.1"),
        ("127.0.0.1", ["198.51.100.1", "10.0.0.5"], "198.51.100.1"),  # two header lines
        ("127.0.0.1", ["192.0.2.1, 198.51.100.1"], "198.51.100.1"),
        ("127.0.0.1", ["10.0.0.6, 10.0.0.5"], "10.0.0.6"),  # every hop trusted: the furthest
        ("127.0.0.1", ["198.51.100.1, unknown"], "127.0.0.1"),  # garbage: the proxy's own
        ("127.0.0.1", ["198.51.100.1, garbage, 10.0.0.5"], "10.0.0.5"),
        ("127.0.0.1", ["198.51.100.1:4711"], "198.51.100.1"),
        ("127.0.0.1", ["[2001:db8::1]:4711"], "2001:db8::1"),
        ("::ffff:127.0.0.1", ["2001:db8::1"], "2001:db8::1"),  # IPv4-mapped peer
        ("::ffff:203.0.113.9", ["198.51.100.1"], "203.0.113.9"),
        ("testclient", ["198.51.100.1"], "testclient"),  # not an IP peer: as it is
        (None, ["198.51.100.1"], None),
    ],
)
def test_client_address(peer: str | None, header: list[str], expected: str | None) -> None:
    trusted = [ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("10.0.0.0/8")]
    assert client_address(peer, header, trusted) == expected


@pytest.mark.unit
def test_nothing_is_trusted_by_default() -> None:
    assert client_address("127.0.0.1", ["198.51.100.1"], []) == "127.0.0.1"
    assert parse_address(" 198.51.100.1 ") == ipaddress.ip_address("198.51.100.1")
    assert parse_address("not-an-ip") is None
