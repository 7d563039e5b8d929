"""What a bench stands up in place of Prometheus and an OTLP collector:
a /metrics scraper thread and a small OTLP/HTTP sink that counts what the
services export (`bench.load.observability_cost`)."""

from __future__ import annotations

import gzip
import threading
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Scraper:
    """GET /metrics every `interval_s` from a thread, as Prometheus would; the
    exposition is parsed only after the run (parsing in the load client's
    process would slow the client it shares the interpreter with)."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url = url
        self.interval_s = interval_s
        self.scrapes = 0
        self.failures: list[str] = []
        self.last = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="scraper", daemon=True)

    def start(self) -> Scraper:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._scrape()
            self._stop.wait(self.interval_s)

    def _scrape(self) -> None:
        try:
            with urllib.request.urlopen(self.url, timeout=5) as reply:
                self.last = reply.read().decode()
            self.scrapes += 1
        except OSError as exc:
            self.failures.append(str(exc))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def finish(self, expected: int) -> dict[str, Any]:
        """One last scrape after the run; what it counted for Retrieve."""
        self.stop()
        self._scrape()
        handled = retrieve_handled(self.last)
        return {
            "scrapes": self.scrapes,
            "failures": self.failures[:3],
            "retrieve_handled": handled,
            "expected": expected,
            "all_counted": sum(handled.values()) == expected,
        }


def retrieve_handled(exposition: str) -> dict[str, int]:
    """`grpc_server_handled_total` of the Retrieve method, by gRPC code."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "grpc_server_handled_total" and labels["grpc_method"] == "Retrieve":
                code = labels["grpc_code"]
                counts[code] = counts.get(code, 0) + int(sample.value)
    return counts


class OtlpSink:
    """A stand-in OTLP/HTTP collector: `POST /v1/traces` answered 200 with an
    empty protobuf body; keeps the bodies to count spans after the run."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.bodies: list[tuple[str, bytes]] = []  # (content-encoding, body)
        self.other_paths: Counter[str] = Counter()
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the exporter keeps its connection

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.received(self.path, self.headers.get("Content-Encoding", ""), body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> OtlpSink:
        self._thread.start()
        return self

    def received(self, path: str, encoding: str, body: bytes) -> None:
        with self._lock:
            if path != "/v1/traces":
                self.other_paths[path] += 1
                return
            self.requests += 1
            self.bytes += len(body)
            self.bodies.append((encoding, body))

    def take(self) -> dict[str, Any]:
        """The counts since the last take, spans decoded now."""
        with self._lock:
            requests, size, bodies = self.requests, self.bytes, self.bodies
            self.requests, self.bytes, self.bodies = 0, 0, []
        spans: Counter[str] = Counter()
        services: Counter[str] = Counter()
        traces: set[bytes] = set()
        for encoding, body in bodies:
            for service, span in _spans(gzip.decompress(body) if encoding == "gzip" else body):
                spans[span.name] += 1
                services[service] += 1
                traces.add(span.trace_id)
        return {
            "export_requests": requests,
            "bytes": size,
            "spans": sum(spans.values()),
            "traces": len(traces),
            "retrieve_spans": sum(n for name, n in spans.items() if name.endswith("/Retrieve")),
            "spans_by_service": dict(services),
            "spans_by_name": dict(spans.most_common(12)),
        }

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _spans(body: bytes) -> list[tuple[str, Any]]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest.FromString(body)
    found = []
    for resource_spans in request.resource_spans:
        attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
        service = attributes.get("service.name", "?")
        for scope_spans in resource_spans.scope_spans:
            found += [(service, span) for span in scope_spans.spans]
    return found
