"""Requests that cannot be decoded are the caller's mistake: INVALID_ARGUMENT.

Left alone, grpc answers a request whose bytes are not the method's message
(malformed protobuf, a string field that is not valid UTF-8) with UNKNOWN,
naming a Python exception class, and logs several ERROR lines for it.
`RequestDecodingInterceptor` wraps every method's deserializer so that such a
request reaches a small behaviour that aborts with INVALID_ARGUMENT ("request
could not be decoded as <message type>: <why>") and logs one WARNING line.
It runs right after caller identification (`services.runtime.server`), so an
unknown caller learns nothing, not even that its bytes were malformed.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from services.core.logging import get_logger
from services.runtime.interceptor import HandlerInterceptor

log = get_logger(__name__)

Deserializer = Callable[[bytes], Any]


@dataclass(frozen=True)
class Undecodable:
    """Stands in for a request whose bytes could not be decoded."""

    reason: str


def message_type_of(deserializer: Deserializer) -> str:
    """The protobuf type a deserializer makes (`Msg.FromString`), else its name."""
    owner = getattr(deserializer, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    full_name = getattr(descriptor, "full_name", None)
    return full_name if isinstance(full_name, str) else getattr(deserializer, "__name__", "?")


def plain_reason(exc: Exception) -> str:
    """protobuf says "Error parsing message with type 'X': Wire format was
    corrupt"; the part after the type is what the caller needs."""
    if isinstance(exc, DecodeError):
        reason = str(exc).rpartition("': ")[2].strip()
        return reason[:1].lower() + reason[1:] if reason else "malformed protobuf"
    return "malformed request"


def tolerant(deserializer: Deserializer) -> Deserializer:
    """`deserializer` that returns an `Undecodable` instead of raising."""

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # any failure to decode is the caller's bytes
            return Undecodable(plain_reason(exc))

    return decode


class _Rejector:
    """Aborts a call that received an `Undecodable`, logging it once."""

    def __init__(self, method: str, message_type: str) -> None:
        self.method = method
        self.message_type = message_type

    async def reject(self, request: Undecodable, context: grpc.aio.ServicerContext) -> None:
        log.warning(
            "request_undecodable",
            method=self.method,
            message_type=self.message_type,
            reason=request.reason,
        )
        details = f"request could not be decoded as {self.message_type}: {request.reason}"
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, details)

    async def checked(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, Undecodable):
                await self.reject(request, context)
            yield request


async def await_result(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def stream_result(value: Any) -> AsyncIterator[Any]:
    """Yield what a streaming behaviour produces (async or plain iterator, or
    nothing when it writes through `context.write` instead)."""
    if hasattr(value, "__aiter__"):
        async for item in value:
            yield item
    elif inspect.isawaitable(value):
        await value
    elif value is not None:
        for item in value:
            yield item


def _unary_unary(behaviour: Callable[..., Any], rejector: _Rejector) -> Callable[..., Any]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            await rejector.reject(request, context)
        return await await_result(behaviour(request, context))

    return call


def _unary_stream(behaviour: Callable[..., Any], rejector: _Rejector) -> Callable[..., Any]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        if isinstance(request, Undecodable):
            await rejector.reject(request, context)
        async for item in stream_result(behaviour(request, context)):
            yield item

    return call


def _stream_unary(behaviour: Callable[..., Any], rejector: _Rejector) -> Callable[..., Any]:
    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        return await await_result(behaviour(rejector.checked(requests, context), context))

    return call


def _stream_stream(behaviour: Callable[..., Any], rejector: _Rejector) -> Callable[..., Any]:
    async def call(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async for item in stream_result(behaviour(rejector.checked(requests, context), context)):
            yield item

    return call


_WRAPPERS = {
    "unary_unary": _unary_unary,
    "unary_stream": _unary_stream,
    "stream_unary": _stream_unary,
    "stream_stream": _stream_stream,
}


def guard_handler(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    """A copy of `handler` whose undecodable requests end in INVALID_ARGUMENT."""
    deserializer = handler.request_deserializer
    if deserializer is None:  # raw bytes: nothing to decode
        return handler
    rejector = _Rejector(method, message_type_of(deserializer))
    changes: dict[str, Any] = {"request_deserializer": tolerant(deserializer)}
    for kind, wrap in _WRAPPERS.items():
        behaviour = getattr(handler, kind)
        if behaviour is not None:
            changes[kind] = wrap(behaviour, rejector)
    guarded: grpc.RpcMethodHandler = handler._replace(**changes)  # type: ignore[attr-defined]
    return guarded


class RequestDecodingInterceptor(HandlerInterceptor):
    """Undecodable request bytes → INVALID_ARGUMENT and one WARNING line."""

    def wrap(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        return guard_handler(handler, str(getattr(details, "method", "")))
