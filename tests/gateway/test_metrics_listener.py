"""/metrics lives on a listener of its own (loopback by default), started and
stopped with the app; the public port answers 404 for it."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest

from gateway.metrics import GatewayMetrics, MetricsListener
from services.core.errors import ConfigError
from tests.gateway.support import ALLOWED_ORIGIN, RetrieverServer, gateway_settings, serve_gateway


@pytest.mark.integration
async def test_metrics_are_served_apart_from_the_public_port(retriever: RetrieverServer) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        await client.post(
            f"{gw.url}/v1/search", json={"query": "ports"}, headers={"Origin": ALLOWED_ORIGIN}
        )
        public = await client.get(f"{gw.url}/metrics")
        metrics = await client.get(gw.metrics_url)
        metrics_address = urlsplit(gw.metrics_url)
    assert public.status_code == 404
    assert public.json()["error"]["code"] == "not_found"
    assert metrics.status_code == 200
    assert 'gateway_search_requests_total{outcome="allowed"} 1.0' in metrics.text
    # Which app answers, as on every service's listener (docs/operations.md).
    assert 'rag_service_info{service="gateway",tracing="off"} 1.0' in metrics.text
    assert metrics_address.hostname == "127.0.0.1"  # the default host: loopback only
    assert metrics_address.port != urlsplit(gw.url).port
    with pytest.raises(ConnectionRefusedError):  # stopped with the app
        socket.create_connection(("127.0.0.1", metrics_address.port), timeout=2).close()


@pytest.mark.integration
async def test_metrics_listener_can_be_turned_off(retriever: RetrieverServer) -> None:
    settings = gateway_settings(retriever.addr, gateway_metrics_enabled=False)
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        public = await client.get(f"{gw.url}/metrics")
        assert gw.app.state.metrics_url is None
    assert public.status_code == 404


@pytest.mark.unit
def test_a_taken_metrics_port_stops_start_up_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match="RAG_GATEWAY_METRICS_PORT"):
            MetricsListener.start(
                GatewayMetrics().registry, "127.0.0.1", port, "set RAG_GATEWAY_METRICS_PORT"
            )


@pytest.mark.integration
async def test_a_connection_that_sends_half_a_request_is_closed_and_scrapes_go_on(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # Each idle connection held one of the listener's threads for ever.
    listener = MetricsListener.start(GatewayMetrics().registry, "127.0.0.1", 0, read_timeout_s=0.5)
    try:
        idle = [socket.create_connection(("127.0.0.1", listener.port)) for _ in range(20)]
        for sock in idle:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        closed = []
        for sock in idle:
            sock.settimeout(10)
            closed.append(sock.recv(1024) == b"")
            sock.close()
        async with httpx.AsyncClient() as client:
            scrape = await client.get(listener.url)
    finally:
        await listener.close()
    assert all(closed)
    assert scrape.status_code == 200
    assert "Traceback" not in capfd.readouterr().err  # closed quietly, not one trace each
