"""Every service's client channel (the gateway's to the Retriever, the
Retriever's to the Reranker) reconnects within a couple of seconds once its
peer is back: gRPC's own backoff grows to 120 s, and the gateway refused
searches for 125 s after a 300 s Retriever outage had ended (probe)."""

from __future__ import annotations

import pytest

from gateway.retriever_client import RetrieverClient
from services.runtime.server import client_channel_options

pytestmark = pytest.mark.unit


def test_client_channels_cap_their_reconnect_backoff() -> None:
    options = dict(client_channel_options(1 << 20))
    assert options["grpc.max_reconnect_backoff_ms"] == 2000
    assert options["grpc.initial_reconnect_backoff_ms"] == 250
    # gRPC's minimum connect timeout (tests/runtime/test_slow_handshake.py).
    assert options["grpc.min_reconnect_backoff_ms"] == 2000


def test_the_gateway_channel_is_built_with_them(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[list[tuple[str, int | str]]] = []

    def spy(address: str, security: object, options: list[tuple[str, int | str]]) -> object:
        built.append(options)
        return object()

    monkeypatch.setattr("gateway.retriever_client.aio_channel", spy)
    client = RetrieverClient("127.0.0.1:1", 1 << 20, client_factory=_no_client)  # type: ignore[arg-type]
    client.open()
    assert dict(built[0])["grpc.max_reconnect_backoff_ms"] == 2000


def _no_client(settings: object, channel: object) -> None:
    return None
