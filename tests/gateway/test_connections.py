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


def test_a_peer_is_bounded_and_its_released_connections_are_counted_back() -> None:
    ledger, _ = _ledger()
    assert [ledger.admit("10.0.0.1") for _ in range(3)] == [
        None,
        None,
        "too_many_client_connections",
    ]
    assert ledger.admit("10.0.0.2") is None  # another peer has its own share
    ledger.release("10.0.0.1")
    assert ledger.admit("10.0.0.1") is None
    assert (ledger.total, dict(ledger.by_peer)) == (3, {"10.0.0.1": 2, "10.0.0.2": 1})
    for _ in range(2):
        ledger.release("10.0.0.1")
    assert dict(ledger.by_peer) == {"10.0.0.2": 1}  # no entry left behind per departed peer


def test_the_total_bounds_every_peer_and_trusted_proxies_only_by_it() -> None:
    proxy = ipaddress.ip_network("10.9.0.0/16")
    ledger, _ = _ledger(trusted_proxies=(proxy,))
    assert [ledger.admit("10.9.0.5") for _ in range(4)] == [None] * 4
    assert ledger.admit("10.9.0.5") == "too_many_connections"
    assert ledger.admit("10.0.0.1") == "too_many_connections"


def test_refusals_reach_the_observer() -> None:
    ledger, refused = _ledger()
    ledger.refused("head_timeout")
    assert refused == ["head_timeout"]
