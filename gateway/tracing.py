"""The gateway's span for one search: a SERVER span continuing the client's
W3C trace context (a `traceparent` header), under which the Retrieve call
carries the context and the request id on to the Retriever
(services.common.observability.propagation)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from starlette.requests import Request

from services.common.observability.propagation import extract_context, request_id_var
from services.common.observability.tracing import Tracing

ROUTE = "/v1/search"


class GatewayTracing:
    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing
        self.tracer = tracing.tracer

    @contextmanager
    def request_span(self, request: Request, request_id: str) -> Iterator[trace.Span]:
        """The search's span (a no-op one while tracing is off), with the
        request id set for the calls made under it."""
        token = request_id_var.set(request_id)
        try:
            with self.tracer.start_as_current_span(
                f"POST {ROUTE}",
                context=extract_context(dict(request.headers)),
                kind=SpanKind.SERVER,
                attributes={
                    "http.request.method": "POST",
                    "http.route": ROUTE,
                    "rag.request_id": request_id,
                },
            ) as span:
                yield span
        finally:
            request_id_var.reset(token)
