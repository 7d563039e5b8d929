"""The per-call metrics every gRPC service exports, named as go-grpc-prometheus
names them (so existing dashboards and habits apply):

- `grpc_server_started_total{grpc_type,grpc_service,grpc_method}`
- `grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}`
- `grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}` (histogram)

started − handled is what is in flight.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# From a cached health check (sub-millisecond) to a long indexing call.
RPC_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.03,
    0.05,
    0.08,
    0.1,
    0.2,
    0.3,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    120.0,
)
_CALL_LABELS = ("grpc_type", "grpc_service", "grpc_method")


class RpcMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.started = Counter(
            "grpc_server_started",
            "RPCs started on the server",
            _CALL_LABELS,
            registry=registry,
        )
        self.handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, by gRPC status code",
            (*_CALL_LABELS, "grpc_code"),
            registry=registry,
        )
        self.handling = Histogram(
            "grpc_server_handling_seconds",
            "Time from a call's arrival to its status, by method",
            _CALL_LABELS,
            buckets=RPC_BUCKETS_S,
            registry=registry,
        )

    def declare(self, grpc_type: str, service: str, method: str) -> None:
        """Make a method's OK series exist at 0 before its first call, so
        rate() and ratio alerts see it from the start."""
        self.started.labels(grpc_type, service, method)
        self.handled.labels(grpc_type, service, method, "OK")
        self.handling.labels(grpc_type, service, method)

    def observe(self, grpc_type: str, service: str, method: str, code: str, seconds: float) -> None:
        self.handled.labels(grpc_type, service, method, code).inc()
        self.handling.labels(grpc_type, service, method).observe(seconds)
