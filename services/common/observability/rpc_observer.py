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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import structlog
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from services.common.observability.propagation import (
    REQUEST_ID_KEY,
    extract_context,
    metadata_dict,
    new_request_id,
    request_id_var,
    valid_request_id,
)
from services.common.observability.rpc_metrics import RpcMetrics
from services.common.request_decoding import await_result, stream_result

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
    """One call being observed: its labels, its span and its outcome."""

    def __init__(self, observer: RpcObserver, kind: str, details: grpc.HandlerCallDetails) -> None:
        self.observer = observer
        self.kind = kind
        self.service, self.method = split_method(str(details.method))
        self.carrier = metadata_dict(details.invocation_metadata)

    @contextmanager
    def observed(self, context: grpc.aio.ServicerContext) -> Iterator[None]:
        request_id = valid_request_id(self.carrier.get(REQUEST_ID_KEY)) or new_request_id()
        id_token = request_id_var.set(request_id)
        log_tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        self.observer.metrics.started.labels(self.kind, self.service, self.method).inc()
        started = time.perf_counter()
        code = grpc.StatusCode.OK
        with self._span(request_id) as span:
            try:
                yield
                code = _code_of(context) or grpc.StatusCode.OK
            except asyncio.CancelledError:
                code = grpc.StatusCode.CANCELLED
                raise
            except grpc.aio.AbortError:
                code = _code_of(context) or grpc.StatusCode.UNKNOWN
                raise
            except Exception:
                code = grpc.StatusCode.UNKNOWN
                raise
            finally:
                elapsed = time.perf_counter() - started
                self.observer.metrics.observe(
                    self.kind, self.service, self.method, code.name, elapsed
                )
                _end_span(span, code)
                structlog.contextvars.reset_contextvars(**log_tokens)
                request_id_var.reset(id_token)

    def _span(self, request_id: str) -> Any:
        tracer = self.observer.tracer
        return tracer.start_as_current_span(
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


def _code_of(context: grpc.aio.ServicerContext) -> grpc.StatusCode | None:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpc versions keep the numeric value
        return next((c for c in grpc.StatusCode if c.value[0] == code), None)
    return None


def _end_span(span: trace.Span, code: grpc.StatusCode) -> None:
    if not span.is_recording():
        return
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code in _SERVER_FAULTS:
        span.set_status(Status(StatusCode.ERROR, code.name))


class RpcObserver(grpc.aio.ServerInterceptor):
    """Counts, times and traces every call; binds its request id to the logs."""

    def __init__(self, metrics: RpcMetrics, tracer: trace.Tracer | None = None) -> None:
        self.metrics = metrics
        self.tracer = tracer or trace.NoOpTracer()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:  # unknown method: grpc answers UNIMPLEMENTED
            return handler
        changes: dict[str, Any] = {}
        for attribute, kind in _KINDS.items():
            behaviour = getattr(handler, attribute)
            if behaviour is not None:
                call = _Call(self, kind, handler_call_details)
                wrap = _streaming if attribute.endswith("_stream") else _unary
                changes[attribute] = wrap(behaviour, call)
        observed: grpc.RpcMethodHandler = handler._replace(**changes)  # type: ignore[attr-defined]
        return observed


def _unary(behaviour: Callable[..., Any], call: _Call) -> Callable[..., Any]:
    async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with call.observed(context):
            return await await_result(behaviour(request, context))

    return observed


def _streaming(behaviour: Callable[..., Any], call: _Call) -> Callable[..., Any]:
    async def observed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        with call.observed(context):
            async for item in stream_result(behaviour(request, context)):
                yield item

    return observed
