"""The gateway's span for one search, under which the Retrieve call carries
the trace context and the request id on to the Retriever
(services.runtime.observability.propagation).

The gateway is the public edge: a caller's `traceparent` header is not
trusted by default. The search starts a trace of its own (sampled by the
gateway's own sampler) with a link to the caller's span, so a client can
neither pick trace ids nor force every request to be sampled.
RAG_GATEWAY_TRUST_TRACEPARENT continues the caller's trace instead, for a
gateway behind a proxy of your own that traces.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from starlette.requests import Request

from services.runtime.observability.propagation import extract_context, request_id_var
from services.runtime.observability.tracing import Tracing

ROUTE = "/v1/search"


class GatewayTracing:
    def __init__(self, tracing: Tracing, trust_traceparent: bool = False) -> None:
        self.tracing = tracing
        self.tracer = tracing.tracer
        self.trust_traceparent = trust_traceparent

    @contextmanager
    def request_span(self, request: Request, request_id: str) -> Iterator[trace.Span]:
        """The search's span (a no-op one while tracing is off), with the
        request id set for the calls made under it."""
        token = request_id_var.set(request_id)
        log_tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        parent, links = self._parent(request)
        try:
            with self.tracer.start_as_current_span(
                f"POST {ROUTE}",
                context=parent,
                links=links,
                kind=SpanKind.SERVER,
                attributes={
                    "http.request.method": "POST",
                    "http.route": ROUTE,
                    "rag.request_id": request_id,
                },
            ) as span:
                yield span
        finally:
            structlog.contextvars.reset_contextvars(**log_tokens)
            request_id_var.reset(token)

    def _parent(self, request: Request) -> tuple[otel_context.Context, list[Link]]:
        """The caller's context to continue, or a fresh root linked to it."""
        caller = extract_context(dict(request.headers))
        if self.trust_traceparent:
            return caller, []
        span_context = trace.get_current_span(caller).get_span_context()
        links = [Link(span_context)] if span_context.is_valid else []
        return otel_context.Context(), links


def describe_response(span: trace.Span, outcome: str, status: int) -> None:
    """The outcome on the span; a 5xx marks it failed (the server's fault)."""
    span.set_attributes({"rag.outcome": outcome, "http.response.status_code": status})
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR, outcome))
