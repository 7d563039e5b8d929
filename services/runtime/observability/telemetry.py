"""One app's telemetry: its Prometheus registry and listener, its tracing,
and the interceptor that observes its calls. `GrpcServer` starts and stops it
with the server, so every service gets the same hooks in one place."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from services.runtime.observability.metrics_listener import MetricsListener
from services.runtime.observability.rpc_metrics import RpcMetrics
from services.runtime.observability.rpc_observer import RpcObserver
from services.runtime.observability.tracing import Tracing

SERVICE_NAME_PREFIX = "rag-"


@dataclass
class Telemetry:
    """`metrics_port` None: no listener (the registry still counts, e.g. for
    tests that read it directly); 0: any free port."""

    service: str
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    tracing: Tracing = field(default_factory=Tracing.off)
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    port_setting: str = ""  # the variable that moves the listener (for errors)

    def __post_init__(self) -> None:
        self.rpc = RpcMetrics(self.registry)
        self.registry.register(ServiceInfo(self.service, self.tracing.enabled))
        self.listener: MetricsListener | None = None

    @classmethod
    def from_settings(cls, settings: Any, service: str, metrics_port: int) -> Telemetry:
        """From a GrpcServiceSettings and the service's own metrics port."""
        port_setting = f"RAG_{service.upper()}_METRICS_PORT"
        return cls(
            service=service,
            tracing=Tracing.from_env(
                SERVICE_NAME_PREFIX + service, record_query_text=settings.trace_query_text
            ),
            metrics_host=settings.metrics_host,
            metrics_port=metrics_port if settings.metrics_enabled else None,
            port_setting=port_setting,
        )

    @property
    def tracer(self) -> trace.Tracer:
        return self.tracing.tracer

    @property
    def metrics_url(self) -> str | None:
        return self.listener.url if self.listener else None

    def observer(self) -> RpcObserver:
        return RpcObserver(self.rpc, self.tracer if self.tracing.enabled else None)

    def start(self) -> None:
        if self.metrics_port is None or self.listener is not None:
            return
        hint = (
            f"set {self.port_setting} or RAG_METRICS_HOST, or RAG_METRICS_ENABLED=false"
            if self.port_setting
            else ""
        )
        self.listener = MetricsListener.start(
            self.registry, self.metrics_host, self.metrics_port, hint
        )

    async def stop(self) -> None:
        if self.listener is not None:
            await self.listener.close()
            self.listener = None
        await asyncio.to_thread(self.tracing.shutdown)  # bounded; off the event loop


class ServiceInfo:
    """`rag_service_info{service, tracing}` = 1: which app answers on this listener."""

    def __init__(self, service: str, tracing: bool) -> None:
        self.labels = [service, "on" if tracing else "off"]

    def collect(self) -> list[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "rag_service_info", "The service on this listener", labels=["service", "tracing"]
        )
        family.add_metric(self.labels, 1.0)
        return [family]
