"""Server-streaming calls (UpsertStream, Verify): one attempt under the
call's deadline, the messages yielded as they arrive, a failure at any point
raised as this package's exception. Never retried: messages already handed
to the caller would be repeated."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc

from rag_client.errors import DeadlineExceeded, from_rpc_error
from rag_client.retry import CallSpec


def start(spec: CallSpec, method: Callable[..., Any], request: Any, metadata: Any) -> Any:
    """Open the stream with the deadline's remaining time as its timeout."""
    remaining = spec.deadline.remaining()
    if remaining <= 0:
        raise DeadlineExceeded(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            "the call's deadline passed before the stream could start",
            method=spec.method,
            attempts=0,
        )
    return method(request, timeout=remaining, metadata=metadata)


def iterate(spec: CallSpec, call: Any) -> Iterator[Any]:
    """The messages of a blocking stream; closing the iterator early cancels it."""
    try:
        yield from call
    except grpc.RpcError as exc:
        raise from_rpc_error(exc, method=spec.method) from exc
    finally:
        call.cancel()  # no-op once the stream has ended


async def aiterate(spec: CallSpec, call: Any) -> AsyncIterator[Any]:
    """The messages of an asyncio stream; closing the iterator early cancels it."""
    try:
        async for message in call:
            yield message
    except grpc.RpcError as exc:
        raise from_rpc_error(exc, method=spec.method) from exc
    finally:
        call.cancel()
