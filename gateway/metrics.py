"""Prometheus metrics of one gateway app, in its own registry, served on a
listener of their own.

A registry per app (not the process-global default) lets several apps live in
one process, as the tests do with two instances sharing Redis.

The metrics are not on the public port: they describe traffic, refusals and
the breaker's state, which is for operators. `MetricsListener` (the one every
service uses) serves them on RAG_GATEWAY_METRICS_HOST:PORT (loopback by
default), started and stopped with the app.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.runtime.observability.metrics_listener import MetricsListener

__all__ = ["GatewayMetrics", "MetricsListener"]

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
# Why a connection was cut before its request reached the app (gateway/connections.py).
CONNECTION_REFUSALS = (
    "too_many_connections",
    "too_many_client_connections",
    "head_timeout",
    "send_timeout",
)


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
        self.connections_refused = Counter(
            "gateway_connections_refused",
            "Connections answered 503 (too many open) or 408 (request head too slow) and "
            "closed, or cut because the client stopped reading (send_timeout), by reason",
            ["reason"],
            registry=self.registry,
        )
        for outcome in OUTCOMES:
            self.requests.labels(outcome=outcome)
            self.latency.labels(outcome=outcome)
        for reason in CONNECTION_REFUSALS:
            self.connections_refused.labels(reason=reason)
        self.set_breaker_state("closed")

    def observe(self, outcome: str, seconds: float) -> None:
        self.requests.labels(outcome=outcome).inc()
        self.latency.labels(outcome=outcome).observe(seconds)

    def set_breaker_state(self, state: str) -> None:
        for name in BREAKER_STATES:
            self.breaker_state.labels(state=name).set(1.0 if name == state else 0.0)

    def connection_refused(self, reason: str) -> None:
        self.connections_refused.labels(reason=reason).inc()
