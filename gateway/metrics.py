"""Prometheus metrics of one gateway app, in its own registry, served on a
listener of their own.

A registry per app (not the process-global default) lets several apps live in
one process, as the tests do with two instances sharing Redis.

The metrics are not on the public port: they describe traffic, refusals and
the breaker's state, which is for operators. `MetricsListener` serves them on
RAG_GATEWAY_METRICS_HOST:PORT (loopback by default) with prometheus_client's
own small HTTP server in a daemon thread, started and stopped with the app.
"""

from __future__ import annotations

import asyncio
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# Every value the `outcome` label can take, so each series exists (at 0) from
# the start and rate() queries never see a gap.
OUTCOMES = (
    "allowed",
    "public_disabled",
    "release_not_current",
    "origin_rejected",
    "rate_limited",
    "budget_exhausted",
    "breaker_open",
    "limiter_unavailable",
    "invalid",
    "upstream_rejected",
    "upstream_unavailable",
    "upstream_timeout",
    "internal",
)

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BREAKER_STATES = ("closed", "open", "half-open")


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "gateway_search_requests",
            "Search requests by outcome",
            ["outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gateway_search_duration_seconds",
            "Time from request arrival to response, by outcome",
            ["outcome"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.retriever_calls = Counter(
            "gateway_retriever_calls",
            "Retrieve RPCs sent downstream, by gRPC status",
            ["code"],
            registry=self.registry,
        )
        self.breaker_state = Gauge(
            "gateway_breaker_state",
            "1 for the breaker's current state as this instance last saw it",
            ["state"],
            registry=self.registry,
        )
        for outcome in OUTCOMES:
            self.requests.labels(outcome=outcome)
            self.latency.labels(outcome=outcome)
        self.set_breaker_state("closed")

    def observe(self, outcome: str, seconds: float) -> None:
        self.requests.labels(outcome=outcome).inc()
        self.latency.labels(outcome=outcome).observe(seconds)

    def set_breaker_state(self, state: str) -> None:
        for name in BREAKER_STATES:
            self.breaker_state.labels(state=name).set(1.0 if name == state else 0.0)


class MetricsListener:
    """`GET /metrics` (any path, in fact) on an address of its own."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @classmethod
    def start(cls, metrics: GatewayMetrics, host: str, port: int) -> MetricsListener:
        try:
            server, thread = start_http_server(port, addr=host, registry=metrics.registry)
        except OSError as exc:
            raise RuntimeError(
                f"the metrics listener cannot listen on {host}:{port} ({exc}); "
                "set RAG_GATEWAY_METRICS_PORT, or RAG_GATEWAY_METRICS_ENABLED=false"
            ) from exc
        return cls(server, thread)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        host = str(host)
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    async def close(self) -> None:
        await asyncio.to_thread(self._stop)

    def _stop(self) -> None:
        self._server.shutdown()  # waits for serve_forever's loop to end
        self._server.server_close()
        self._thread.join(timeout=5)
