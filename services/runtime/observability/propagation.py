"""What travels with a request from one service to the next: the W3C trace
context (`traceparent`, `tracestate`: OpenTelemetry's configured propagator)
and the request id (`x-request-id`), in HTTP headers and gRPC metadata.

The request id is the gateway's (or the caller's own, when it is a sane
token); a server that receives none makes one, so every log line of a call
can be found by it. It lives in a context variable for the duration of a
call, and structlog merges it into every line (services.core.logging).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate

REQUEST_ID_KEY = "x-request-id"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:-]{8,64}$")

request_id_var: ContextVar[str] = ContextVar("request_id", default="")


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


def valid_request_id(value: str | None) -> str:
    """`value` when it is a sane id, else "" (never log what a caller made up at length)."""
    return value if value and _REQUEST_ID.match(value) else ""


def metadata_dict(metadata: Iterable[Any] | None) -> dict[str, str]:
    """gRPC invocation metadata as a dict of text values (binary ones dropped)."""
    carrier: dict[str, str] = {}
    for key, value in metadata or ():
        if isinstance(value, str):
            carrier[key] = value
    return carrier


def extract_context(carrier: Mapping[str, str]) -> otel_context.Context:
    """The caller's trace context (an empty one when it sent none)."""
    return propagate.extract(carrier)


def outgoing_metadata() -> list[tuple[str, str]]:
    """The current trace context and request id, as metadata for a call onwards."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    request_id = request_id_var.get()
    if request_id:
        carrier[REQUEST_ID_KEY] = request_id
    return list(carrier.items())


class ContextPropagatingInterceptor(
    grpc.aio.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.aio.UnaryStreamClientInterceptor,  # type: ignore[misc]
):
    """Adds the trace context and request id to every outgoing call (nothing
    when there is neither: a call outside any request)."""

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        extra = outgoing_metadata()
        if not extra:
            return details
        metadata = grpc.aio.Metadata(*(details.metadata or ()), *extra)
        return details._replace(metadata=metadata)

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)
