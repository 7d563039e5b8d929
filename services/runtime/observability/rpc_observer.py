"""One server interceptor that observes every call: counted and timed
(`RpcMetrics`), traced (a SERVER span, child of the caller's W3C context),
and given a request id that every log line of the call carries.

It is the outermost interceptor, so calls refused by caller identification
are counted too. It wraps the handler the inner interceptors return, for all
four kinds of method, and reads the status the way the client will see it:
an abort's code, CANCELLED when the task is cancelled, UNKNOWN for an
exception nothing translated.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import structlog
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from services.runtime.interceptor import HandlerInterceptor
from services.runtime.observability.propagation import (
    REQUEST_ID_KEY,
    extract_context,
    metadata_dict,
    new_request_id,
    request_id_var,
    valid_request_id,
)
from services.runtime.observability.rpc_metrics import RpcMetrics
from services.runtime.request_decoding import await_result, stream_result

# Codes that mean the server failed (OpenTelemetry's rule for server spans);
# the rest are the caller's business and leave the span's status unset.
_SERVER_FAULTS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
# Health checks and reflection are counted but not traced: probes every few
# seconds would fill the trace store (and keep an idle exporter busy).
UNTRACED_SERVICES = frozenset({"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"})
_KINDS = {
    "unary_unary": "unary",
    "unary_stream": "server_stream",
    "stream_unary": "client_stream",
    "stream_stream": "bidi_stream",
}


def split_method(full: str) -> tuple[str, str]:
    """ "/pkg.Service/Method" → ("pkg.Service", "Method")."""
    service, _, method = full.lstrip("/").rpartition("/")
    return service or "unknown", method or full


class _Call:
    """One call being observed: its labels, its span and its outcome.

    The request id and the log context are set, never reset: grpc.aio runs
    every call in a task of its own, whose context ends with it. The span is
    made current only while the call's own code runs (around each step of a
    streaming method), never across a `yield`: a stream whose client went
    away is finalised later, in another task, where a context token from
    this one cannot be detached.
    """

    def __init__(self, observer: RpcObserver, kind: str, details: grpc.HandlerCallDetails) -> None:
        self.observer = observer
        self.kind = kind
        self.service, self.method = split_method(str(details.method))
        self.carrier = metadata_dict(details.invocation_metadata)
        self.code = grpc.StatusCode.OK
        self.span: trace.Span = trace.INVALID_SPAN
        self.started = 0.0

    def begin(self) -> None:
        request_id = valid_request_id(self.carrier.get(REQUEST_ID_KEY)) or new_request_id()
        request_id_var.set(request_id)
        structlog.contextvars.bind_contextvars(request_id=request_id)
        self.observer.metrics.started.labels(self.kind, self.service, self.method).inc()
        self.span = self._span(request_id)
        self.started = time.perf_counter()

    @contextmanager
    def current(self) -> Iterator[None]:
        """The call's span as the current one, for a stretch of its own code."""
        with trace.use_span(self.span, end_on_exit=False, record_exception=False):
            yield

    def settle(self, context: grpc.aio.ServicerContext, exc: BaseException | None) -> None:
        """The status the client saw, into the metrics and onto the span."""
        self.code = _status_of(context, exc)
        elapsed = time.perf_counter() - self.started
        self.observer.metrics.observe(self.kind, self.service, self.method, self.code.name, elapsed)
        _end_span(self.span, self.code)

    def _span(self, request_id: str) -> trace.Span:
        if self.service in UNTRACED_SERVICES:
            return trace.INVALID_SPAN
        return self.observer.tracer.start_span(
            f"{self.service}/{self.method}",
            context=extract_context(self.carrier),
            kind=SpanKind.SERVER,
            attributes={
                "rpc.system": "grpc",
                "rpc.service": self.service,
                "rpc.method": self.method,
                "rag.request_id": request_id,
            },
            record_exception=False,
            set_status_on_exception=False,
        )


# The server's deadline starts when the call's header arrives, a moment after the
# client's: a client whose own deadline fired cancels while the server still sees
# a few milliseconds left. A cancellation that close to the deadline is its expiry.
DEADLINE_SLACK_S = 0.1


def _status_of(context: grpc.aio.ServicerContext, exc: BaseException | None) -> grpc.StatusCode:
    """OK, an abort's (or set_code's) code, DEADLINE_EXCEEDED for a call
    cancelled because its deadline passed, CANCELLED for one whose client went
    away, UNKNOWN for an exception nothing translated."""
    if exc is None:
        return _code_of(context) or grpc.StatusCode.OK
    if isinstance(exc, grpc.aio.AbortError):
        return _code_of(context) or grpc.StatusCode.UNKNOWN
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        remaining = context.time_remaining()
        if remaining is not None and remaining <= DEADLINE_SLACK_S:
            return grpc.StatusCode.DEADLINE_EXCEEDED
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


def _code_of(context: grpc.aio.ServicerContext) -> grpc.StatusCode | None:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpc versions keep the numeric value
        return next((c for c in grpc.StatusCode if c.value[0] == code), None)
    return None


def _end_span(span: trace.Span, code: grpc.StatusCode) -> None:
    if span.is_recording():
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        if code in _SERVER_FAULTS:
            span.set_status(Status(StatusCode.ERROR, code.name))
    span.end()


class RpcObserver(HandlerInterceptor):
    """Counts, times and traces every call; binds its request id to the logs."""

    def __init__(self, metrics: RpcMetrics, tracer: trace.Tracer | None = None) -> None:
        self.metrics = metrics
        self.tracer = tracer or trace.NoOpTracer()

    def wrap(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        changes: dict[str, Any] = {}
        for attribute, kind in _KINDS.items():
            behaviour = getattr(handler, attribute)
            if behaviour is not None:
                call = _Call(self, kind, details)
                wrap = _streaming if attribute.endswith("_stream") else _unary
                changes[attribute] = wrap(behaviour, call)
        observed: grpc.RpcMethodHandler = handler._replace(**changes)  # type: ignore[attr-defined]
        return observed


def _unary(behaviour: Callable[..., Any], call: _Call) -> Callable[..., Any]:
    async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
        call.begin()
        try:
            with call.current():
                result = await await_result(behaviour(request, context))
        except BaseException as exc:
            call.settle(context, exc)
            raise
        call.settle(context, None)
        return result

    return observed


def _streaming(behaviour: Callable[..., Any], call: _Call) -> Callable[..., Any]:
    async def observed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        call.begin()
        with call.current():
            items = stream_result(behaviour(request, context)).__aiter__()
        try:
            while True:
                with call.current():
                    try:
                        item = await items.__anext__()
                    except StopAsyncIteration:
                        break
                yield item
        except BaseException as exc:
            call.settle(context, exc)
            raise
        call.settle(context, None)

    return observed
