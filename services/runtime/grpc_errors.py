"""The one place where domain exceptions become gRPC status codes."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from services.core import errors
from services.core.logging import get_logger

log = get_logger(__name__)

_STATUS: list[tuple[type[errors.RagError], grpc.StatusCode]] = [
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (errors.ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.Cancelled, grpc.StatusCode.CANCELLED),
    (errors.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.Aborted, grpc.StatusCode.ABORTED),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
    (errors.StoreError, grpc.StatusCode.INTERNAL),
    (errors.ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
]


def status_for(exc: BaseException) -> grpc.StatusCode:
    for exc_type, code in _STATUS:
        if isinstance(exc, exc_type):
            return code
    return grpc.StatusCode.INTERNAL


R = TypeVar("R")


async def _abort(context: grpc.aio.ServicerContext, method: str, exc: Exception) -> None:
    code = status_for(exc)
    shortage = errors.machine_shortage(exc) if code == grpc.StatusCode.INTERNAL else None
    if shortage is not None:
        # Not a bug of ours nor the caller's: the same call succeeds once an
        # operator frees the resource, so UNAVAILABLE (callers may retry), and
        # logged as an error so the operator hears of it.
        log.error("rpc_failed_machine_short", method=method, shortage=shortage, error=str(exc))
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            f"the server is {shortage}: send the call again once an operator has seen to it",
        )
    if code == grpc.StatusCode.INTERNAL:
        log.exception("rpc_failed", method=method)
        # The class and message stay in the log: they describe our code, not the request.
        await context.abort(code, "internal error (logged by the server)")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        # A scope the caller may not read or write (services.runtime.security
        # .scopes), refused in the servicer: logged as the interceptor logs a
        # role or credential refusal, once, so every refusal can be audited.
        log.warning("call_refused", method=method, code=code.name, reason=str(exc))
        await context.abort(code, str(exc))
    # An expected refusal (bad input, a model not loaded yet, ...) is answered
    # to the caller, who decides what it means; at INFO it would be one line
    # per request for as long as the condition lasts. INTERNAL above is ours.
    log.debug("rpc_rejected", method=method, code=code.name, error=str(exc))
    await context.abort(code, str(exc))


def unary(
    fn: Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]],
) -> Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]:
    """Wrap a unary servicer method so RagErrors become the right status."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            return await fn(self, request, context)
        except errors.RagError as exc:
            await _abort(context, fn.__name__, exc)
            raise  # unreachable: abort raises
        except (grpc.aio.AbortError, grpc.aio.BaseError):
            raise
        except Exception as exc:
            await _abort(context, fn.__name__, exc)
            raise

    return wrapper


def streaming(
    fn: Callable[[Any, Any, grpc.aio.ServicerContext], AsyncIterator[R]],
) -> Callable[[Any, Any, grpc.aio.ServicerContext], AsyncIterator[R]]:
    """Same as `unary` for server-streaming methods."""

    @functools.wraps(fn)
    async def wrapper(
        self: Any, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[R]:
        try:
            async for item in fn(self, request, context):
                yield item
        except (grpc.aio.AbortError, grpc.aio.BaseError):
            raise
        except Exception as exc:
            await _abort(context, fn.__name__, exc)

    return wrapper
