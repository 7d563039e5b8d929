"""Circuit breaker around the Retriever, on `pybreaker`.

Closed: calls pass, consecutive downstream failures are counted. After
`fail_max` of them it opens: calls are refused at once (503) without touching
the Retriever. After `reset_s` it half-opens: one probe call per instance goes
through; success closes it, failure opens it again.

Only failures of the Retriever count (unavailable, timed out, internal
errors). A request the Retriever rejects as invalid says nothing about its
health, so it counts as a success. State lives in memory, or in Redis
(pybreaker's own storage) so that every instance sees the same circuit.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import grpc
import pybreaker
import redis

from gateway.errors import ApiError, ErrorCode

REDIS_TIMEOUT_S = 0.5

# gRPC codes that describe the caller's request, not the Retriever's health.
_CALLER_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.CANCELLED,
    }
)


def is_caller_error(exc: BaseException) -> bool:
    """True when `exc` must not count against the Retriever."""
    if isinstance(exc, asyncio.CancelledError | ApiError):
        return True
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() in _CALLER_CODES


def build_breaker_storage(
    redis_url: str, namespace: str
) -> tuple[pybreaker.CircuitBreakerStorage, redis.Redis | None]:
    """Memory storage, or pybreaker's Redis storage (and its client to close)."""
    if not redis_url:
        return pybreaker.CircuitMemoryStorage(pybreaker.STATE_CLOSED), None
    client = redis.Redis.from_url(
        redis_url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )
    storage = pybreaker.CircuitRedisStorage(
        pybreaker.STATE_CLOSED, client, namespace=f"{namespace}:retriever"
    )
    return storage, client


class _StateListener(pybreaker.CircuitBreakerListener):
    def __init__(self, on_state: Callable[[str], None]) -> None:
        self.on_state = on_state

    def state_change(
        self,
        cb: pybreaker.CircuitBreaker,
        old_state: pybreaker.CircuitBreakerState | None,
        new_state: pybreaker.CircuitBreakerState,
    ) -> None:
        self.on_state(new_state.name)


class RetrieverBreaker:
    """`async with breaker.guard(): await call()` runs `call` under the breaker,
    or raises ApiError(BREAKER_OPEN) without running it."""

    def __init__(
        self,
        fail_max: int,
        reset_s: float,
        storage: pybreaker.CircuitBreakerStorage | None = None,
        on_state: Callable[[str], None] | None = None,
    ) -> None:
        listeners = [_StateListener(on_state)] if on_state is not None else []
        self.storage = storage or pybreaker.CircuitMemoryStorage(pybreaker.STATE_CLOSED)
        self.breaker = pybreaker.CircuitBreaker(
            fail_max=fail_max,
            reset_timeout=reset_s,
            exclude=[is_caller_error],
            listeners=listeners,
            state_storage=self.storage,
            name="retriever",
            # The call that trips the breaker reports its own failure.
            throw_new_error_on_trip=False,
        )
        self._probe_in_flight = False

    @property
    def state(self) -> str:
        return self.breaker.current_state

    @contextlib.asynccontextmanager
    async def guard(self) -> AsyncIterator[None]:
        probing = self.state != pybreaker.STATE_CLOSED
        if probing and self._probe_in_flight:
            raise self._open_error()
        self._probe_in_flight = self._probe_in_flight or probing
        try:
            # pybreaker's context manager is synchronous, but holds no lock
            # while the body runs, so an await inside it is safe.
            with self.breaker.calling():
                yield
        except pybreaker.CircuitBreakerError:
            raise self._open_error() from None
        finally:
            if probing:
                self._probe_in_flight = False

    def _open_error(self) -> ApiError:
        return ApiError(
            ErrorCode.BREAKER_OPEN,
            "the search backend is failing; requests are paused briefly",
            retry_after_s=self._seconds_until_probe(),
        )

    def _seconds_until_probe(self) -> int:
        opened_at = self.storage.opened_at
        if opened_at is None:
            return 1
        remaining = self.breaker.reset_timeout - (datetime.now(UTC) - opened_at).total_seconds()
        return max(1, math.ceil(remaining))
