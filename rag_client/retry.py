"""One call under one deadline: attempts, retries of UNAVAILABLE only, and
the mapping of the final status to this package's exceptions.

Only calls marked `idempotent` (safe to repeat: Retrieve, IndexStatus,
Stats) are retried. Every attempt gets the deadline's remaining time as its
gRPC timeout; a retry is made only when the remaining time is longer than
its backoff, so the call never outlives its deadline."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import grpc

from rag_client.deadline import Deadline
from rag_client.errors import CallError, DeadlineExceeded, Unavailable, from_rpc_error
from rag_client.settings import RetryPolicy

T = TypeVar("T")


@dataclass(frozen=True)
class CallSpec:
    """What the retry loop needs to know about one call."""

    method: str  # "Retriever/Retrieve", for messages
    deadline: Deadline
    policy: RetryPolicy
    idempotent: bool
    rand: Callable[[], float] = field(default=random.random, repr=False)


def _expired(spec: CallSpec, attempts: int) -> DeadlineExceeded:
    return DeadlineExceeded(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        "the call's deadline passed before an attempt could be made",
        method=spec.method,
        attempts=attempts,
    )


def next_pause(spec: CallSpec, error: CallError, attempt: int) -> float | None:
    """Seconds to wait before another attempt, or None to give up."""
    if not isinstance(error, Unavailable) or not spec.idempotent:
        return None
    if attempt >= spec.policy.max_attempts:
        return None
    pause = spec.policy.backoff(attempt, spec.rand)
    return pause if pause < spec.deadline.remaining() else None


def call(
    spec: CallSpec, attempt_once: Callable[[float], T], sleep: Callable[[float], None] = time.sleep
) -> T:
    """Run `attempt_once(timeout_seconds)` until it succeeds or may not be retried."""
    attempt = 0
    while True:
        remaining = spec.deadline.remaining()
        if remaining <= 0:
            raise _expired(spec, attempt)
        attempt += 1
        try:
            return attempt_once(remaining)
        except grpc.RpcError as exc:
            error = from_rpc_error(exc, method=spec.method, attempts=attempt)
            pause = next_pause(spec, error, attempt)
            if pause is None:
                raise error from exc
        sleep(pause)


async def call_async(
    spec: CallSpec,
    attempt_once: Callable[[float], Awaitable[T]],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """The asyncio counterpart of `call`."""
    attempt = 0
    while True:
        remaining = spec.deadline.remaining()
        if remaining <= 0:
            raise _expired(spec, attempt)
        attempt += 1
        try:
            return await attempt_once(remaining)
        except grpc.RpcError as exc:
            error = from_rpc_error(exc, method=spec.method, attempts=attempt)
            pause = next_pause(spec, error, attempt)
            if pause is None:
                raise error from exc
        await sleep(pause)
