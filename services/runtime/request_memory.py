"""A refused request does not outlive its call.

A request is decoded before any check can refuse it (`request_decoding`): the
12 MB of a 12 MB Retrieve are received as bytes, decoded into a message of the
same size, and its query read into a `str` of up to that size by the check
that refuses it. Two things kept that memory after the refusal:

1. grpc.aio keeps the `AbortError` of an aborted call on the call's state.
   Its traceback holds the frames the error went through (every interceptor's
   wrapper and the servicer, each with the request among its locals; the
   refusal's own cause, e.g. `InvalidArgument`, with the frame that read the
   query), and those frames hold the context, which holds the call's state: a
   reference cycle. Only the cyclic garbage collector frees it, and it counts
   objects, not bytes: the cycle outlives a young collection or two, then
   waits for a full one, minutes away in a process with a large heap.
   `ReleaseInterceptor`, the outermost interceptor, clears those frames when a
   call ends in an abort and drops its own reference to the request, so the
   request is freed when the call ends.
2. glibc's malloc returns freed memory to the system only above a threshold
   that grows with the largest block freed so far, so a few large requests
   leave their pages resident. After a call whose request was large
   (`LARGE_REQUEST_BYTES`, noted as it is decoded), the heap is trimmed
   once the call has ended (`malloc_trim`; a no-op off glibc).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import ctypes.util
import functools
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from services.runtime.interceptor import HandlerInterceptor
from services.runtime.request_decoding import Deserializer, await_result, stream_result

# A request at least this large is followed by a heap trim when its call ends
# (a trim takes milliseconds, in a thread; Retrieve requests this large are
# rare, Upserts this large take seconds anyway).
LARGE_REQUEST_BYTES = 1024 * 1024

_large_request: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "large_request", default=False
)


def noting_size(deserializer: Deserializer) -> Deserializer:
    """`deserializer` that marks the call as large when a request message
    is. It runs in the call's own task (grpc.aio decodes there), so the
    call's wrapper below sees the mark."""

    def decode(data: bytes) -> Any:
        if len(data) >= LARGE_REQUEST_BYTES:
            _large_request.set(True)
        return deserializer(data)

    return decode


def release_frames(exc: BaseException) -> None:
    """Clear the locals of every finished frame in `exc`'s traceback and in
    those of the exceptions it was raised from or during."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        pending += [current.__context__, current.__cause__]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc), if it can."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _after_call(context: grpc.aio.ServicerContext) -> None:
    """Once the call has ended (its task done, the request unreferenced),
    trim the heap if the request was large."""
    if _large_request.get():
        loop = asyncio.get_running_loop()
        context.add_done_callback(lambda _: _trim_in_thread(loop))


def _trim_in_thread(loop: asyncio.AbstractEventLoop) -> None:
    """A trim walks every arena (milliseconds on a large heap): off the event
    loop, in its default executor (ctypes releases the GIL for the call)."""
    with contextlib.suppress(RuntimeError):  # executor shut down: the process is stopping
        loop.run_in_executor(None, trim_heap)


def _unary(behaviour: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await await_result(behaviour(request, context))
        except grpc.aio.AbortError as exc:
            # This frame stays in the error's traceback: it must not keep the request.
            del request
            release_frames(exc)
            raise
        finally:
            _after_call(context)

    return call


def _streaming(behaviour: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for item in stream_result(behaviour(request, context)):
                yield item
        except grpc.aio.AbortError as exc:
            del request
            release_frames(exc)
            raise
        finally:
            _after_call(context)

    return call


class ReleaseInterceptor(HandlerInterceptor):
    """Outermost: a call's request is freed when the call ends, aborted or not,
    and a large one is followed by a heap trim."""

    def wrap(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        changes: dict[str, Any] = {}
        if handler.request_deserializer is not None:
            changes["request_deserializer"] = noting_size(handler.request_deserializer)
        for kind in ("unary_unary", "stream_unary"):
            if (behaviour := getattr(handler, kind)) is not None:
                changes[kind] = _unary(behaviour)
        for kind in ("unary_stream", "stream_stream"):
            if (behaviour := getattr(handler, kind)) is not None:
                changes[kind] = _streaming(behaviour)
        released: grpc.RpcMethodHandler = handler._replace(**changes)  # type: ignore[attr-defined]
        return released
