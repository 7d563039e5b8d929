"""OpenTelemetry tracing, configured by the standard OTEL_* variables, off
unless they ask for it.

Tracing is on when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`,
`console`) or an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none` turn it off whatever else is set. Everything else
is the SDK's own reading of its variables: the sampler (`OTEL_TRACES_SAMPLER`,
parent-based always-on by default), the batch processor (`OTEL_BSP_*`), the
OTLP endpoint, headers, certificates and timeout, and `OTEL_SERVICE_NAME` /
`OTEL_RESOURCE_ATTRIBUTES`. The protocol is `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`
or `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the specification's
default) or `grpc`.

Each app gets a `Tracing` of its own (a provider, not the process-global one),
so the Indexer and the Retriever in one process report as two services
(`rag-indexer`, `rag-retriever`: set `OTEL_SERVICE_NAME` only for a process
that runs one service, since it names every provider in the process), and a
test can hand an app a provider with an in-memory exporter.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

from services.core.errors import ConfigError
from services.core.logging import get_logger

log = get_logger(__name__)

TRACER_NAME = "rag"
SHUTDOWN_TIMEOUT_S = 2.0
EXPORTERS = ("otlp", "console")
PROTOCOLS = ("http/protobuf", "grpc")
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def exporters_from_env(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the environment asks for; () means tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not named:
        return ("otlp",) if any(environ.get(name) for name in _ENDPOINTS) else ()
    chosen = tuple(part.strip() for part in named.split(",") if part.strip())
    if "none" in chosen:
        return ()
    unknown = [name for name in chosen if name not in EXPORTERS]
    if unknown:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER: {unknown[0]!r} is not one of {', '.join(EXPORTERS)} or none"
        )
    return chosen


def otlp_exporter(environ: Mapping[str, str]) -> SpanExporter:
    """The OTLP exporter for the configured protocol (it reads its own
    endpoint, headers, certificate and timeout variables)."""
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        return HttpSpanExporter()
    raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not one of {PROTOCOLS}")


@dataclass(frozen=True)
class Tracing:
    """One app's tracer; `provider` None: tracing is off (a no-op tracer)."""

    provider: TracerProvider | None = None
    # Raw query text on spans only when a retention setting allows it.
    record_query_text: bool = False

    @classmethod
    def off(cls) -> Tracing:
        return cls()

    @classmethod
    def from_env(
        cls,
        service_name: str,
        environ: Mapping[str, str] | None = None,
        record_query_text: bool = False,
    ) -> Tracing:
        environ = os.environ if environ is None else environ
        exporters = exporters_from_env(environ)
        if not exporters:
            return cls(record_query_text=record_query_text)
        check_sampler(environ)
        provider = _provider(service_name)
        for name in exporters:
            if name == "console":
                provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
            else:
                provider.add_span_processor(_batch_processor(otlp_exporter(environ), environ))
        return cls(provider, record_query_text)

    @classmethod
    def with_exporter(cls, service_name: str, exporter: SpanExporter) -> Tracing:
        """Spans to `exporter` as each ends (tests: an in-memory exporter)."""
        provider = _provider(service_name)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return cls(provider, record_query_text=False)

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    @property
    def tracer(self) -> trace.Tracer:
        if self.provider is None:
            return trace.NoOpTracer()
        return self.provider.get_tracer(TRACER_NAME)

    def shutdown(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Flush what is buffered and stop, waiting at most `timeout_s`: with
        the collector unreachable the exporter retries with backoff for tens
        of seconds, which must not eat a shutdown grace period. What is not
        exported by then is lost (a daemon thread keeps trying until exit)."""
        provider = self.provider
        if provider is None:
            return
        worker = threading.Thread(target=provider.shutdown, name="otel-shutdown", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            log.warning("trace_export_unfinished", waited_s=timeout_s)


def _provider(service_name: str) -> TracerProvider:
    # Resource.create adds OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (which wins).
    return TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))


# The SDK's samplers by name (OTEL_TRACES_SAMPLER); the SDK itself replaces an
# unknown name with always-on after a warning, so a typo traced everything.
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


def check_sampler(environ: Mapping[str, str]) -> None:
    """ConfigError for an OTEL_TRACES_SAMPLER the SDK does not know, or a
    ratio sampler's OTEL_TRACES_SAMPLER_ARG that is not a number in 0..1
    (the SDK falls back to 1.0 with a warning)."""
    name = environ.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if name and name not in SAMPLERS and name not in _installed_samplers():
        raise ConfigError(
            f"OTEL_TRACES_SAMPLER: {name[:60]!r} is not one of {', '.join(SAMPLERS)} "
            "(or a sampler an installed package registers)"
        )
    arg = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    if name.endswith("traceidratio") and arg:
        try:
            ratio = float(arg)
        except ValueError:
            ratio = float("nan")
        if not 0.0 <= ratio <= 1.0:  # NaN fails too
            raise ConfigError(
                f"OTEL_TRACES_SAMPLER_ARG: {arg[:60]!r} is not a sampling ratio from 0 to 1"
            )


def _installed_samplers() -> set[str]:
    return {entry.name for entry in entry_points(group="opentelemetry_traces_sampler")}


def _batch_processor(exporter: SpanExporter, environ: Mapping[str, str]) -> BatchSpanProcessor:
    """The SDK's batch processor, which reads OTEL_BSP_* itself and raises a
    bare ValueError for a value it refuses (a traceback at start-up)."""
    try:
        return BatchSpanProcessor(exporter)
    except ValueError as exc:
        given = sorted(name for name in environ if name.startswith("OTEL_BSP_"))
        raise ConfigError(f"{', '.join(given) or 'OTEL_BSP_*'}: {exc}") from None
