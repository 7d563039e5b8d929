"""The connection ledger's bounds, without a server (the server's behaviour:
test_connections_http.py)."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.connections import ConnectionLedger, ConnectionLimits

pytestmark = pytest.mark.unit


def _ledger(**overrides: object) -> tuple[ConnectionLedger, list[str]]:
    values: dict[str, object] = {"head_timeout_s": 1.0, "max_connections": 4, "max_per_client": 2}
    values.update(overrides)
    refused: list[str] = []
    return ConnectionLedger(ConnectionLimits(**values), refused.append), refused  # type: ignore[arg-type]


def _reasons(ledger: ConnectionLedger, peer: str, times: int) -> list[str | None]:
    return [ledger.admit(peer)[1] for _ in range(times)]


def test_a_peer_is_bounded_and_its_released_connections_are_counted_back() -> None:
    ledger, _ = _ledger()
    assert _reasons(ledger, "10.0.0.1", 3) == [None, None, "too_many_client_connections"]
    assert _reasons(ledger, "10.0.0.2", 1) == [None]  # another peer has its own share
    ledger.release("10.0.0.1")
    assert _reasons(ledger, "10.0.0.1", 1) == [None]
    assert (ledger.total, dict(ledger.by_peer)) == (3, {"10.0.0.1": 2, "10.0.0.2": 1})
    for _ in range(2):
        ledger.release("10.0.0.1")
    assert dict(ledger.by_peer) == {"10.0.0.2": 1}  # no entry left behind per departed peer


def test_the_addresses_of_one_ipv6_slash_64_share_one_bound() -> None:
    # The probe's finding: counted per address, one /64 (one host, usually)
    # took every connection slot; the rate limits already group by /64.
    ledger, _ = _ledger(max_connections=100)
    reasons = [ledger.admit(f"2001:db8::{n:x}") for n in range(1, 5)]
    assert [reason for _, reason in reasons] == [None, None, *["too_many_client_connections"] * 2]
    assert {key for key, _ in reasons} == {"2001:db8::/64"}
    assert ledger.admit("2001:db8:0:1::1")[1] is None  # the next /64 is another client
    assert ledger.admit("::ffff:10.0.0.9") == ("10.0.0.9", None)  # IPv4 seen through IPv6


def test_the_total_bounds_every_peer_and_trusted_proxies_only_by_it() -> None:
    proxy = ipaddress.ip_network("10.9.0.0/16")
    ledger, _ = _ledger(trusted_proxies=(proxy,))
    assert _reasons(ledger, "10.9.0.5", 4) == [None] * 4
    assert _reasons(ledger, "10.9.0.5", 1) == ["too_many_connections"]
    assert _reasons(ledger, "10.0.0.1", 1) == ["too_many_connections"]


def test_refusals_reach_the_observer() -> None:
    ledger, refused = _ledger()
    ledger.refused("head_timeout")
    assert refused == ["head_timeout"]
