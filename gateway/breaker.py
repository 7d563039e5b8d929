"""Circuit breaker around the Retriever, on `pybreaker`, counting only what
says something about the Retriever's health.

Closed: calls pass, consecutive downstream failures are counted. After
`fail_max` of them it opens: calls are refused at once (503) without touching
the Retriever. After `reset_s` it half-opens: one probe call per instance goes
through; success closes it, failure opens it again.

What a failed call counts as (`blame`):
- the request's own doing (INVALID_ARGUMENT, a bad page token, NOT_FOUND,
  FAILED_PRECONDITION, OUT_OF_RANGE, PERMISSION_DENIED, a cancelled call —
  every answer that maps to a 4xx): nothing against the Retriever; it
  answered, so it counts as a success;
- the Retriever down (UNAVAILABLE): a failure for everyone;
- a timeout (DEADLINE_EXCEEDED) or anything unexpected (INTERNAL, UNKNOWN,
  ...): the one request may have caused it (a question that costs the
  Retriever more than its deadline allows; probe 3 opened the circuit for
  every user with one client's long Chinese questions, inside its rate
  limit), so it counts against the client first (`ClientStrikes`): after
  `fail_max` of them in `reset_s` that client alone is refused (503) until the
  window ends; only a client's first in its window counts for everyone. One
  caller cannot open the circuit for all; a Retriever that fails every
  request still opens it, after `fail_max` clients saw it fail.

State lives in memory, or in Redis so that every instance sees the same
circuit (pybreaker's own storage) and the same strikes per client (the
`limits` storage the rate limits use).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from enum import Enum

import grpc
import pybreaker
import redis
from limits import RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import FixedWindowRateLimiter
from limits.errors import StorageError

from gateway.errors import ApiError, ErrorCode
from rag_client import CallError

REDIS_TIMEOUT_S = 0.5


class Blame(Enum):
    CALLER = "caller"  # the request's own doing: never counts
    UPSTREAM = "upstream"  # the Retriever is down: counts for everyone
    UNEXPECTED = "unexpected"  # a timeout or an unexpected error: against the client first


# gRPC codes that describe the caller's request, not the Retriever's health
# (gateway.retriever_client maps each to a 4xx).
_CALLER_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.CANCELLED,
    }
)
_UPSTREAM_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})


def blame(exc: BaseException) -> Blame:
    if isinstance(exc, asyncio.CancelledError | ApiError):
        return Blame.CALLER
    if isinstance(exc, CallError):
        if exc.code in _CALLER_CODES:
            return Blame.CALLER
        if exc.code in _UPSTREAM_CODES:
            return Blame.UPSTREAM
    return Blame.UNEXPECTED


def is_caller_error(exc: BaseException) -> bool:
    """True when `exc` must not count against the Retriever."""
    return blame(exc) is Blame.CALLER


class ClientStrikes:
    """Unexpected upstream errors per client, in a fixed window of `window_s`
    from the client's first, kept in a `limits` storage (memory or Redis)."""

    def __init__(
        self,
        storage: Storage,
        fail_max: int,
        window_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limiter = FixedWindowRateLimiter(storage)
        self.item = RateLimitItemPerSecond(fail_max, max(1, math.ceil(window_s)))
        self.clock = clock

    async def check(self, client: str) -> None:
        """ApiError(BREAKER_OPEN) while `client` has used up its strikes."""
        try:
            if await self.limiter.test(self.item, "breaker-client", client):
                return
            stats = await self.limiter.get_window_stats(self.item, "breaker-client", client)
        except StorageError as exc:
            raise ApiError(
                ErrorCode.LIMITER_UNAVAILABLE,
                "request limits cannot be checked right now; try again shortly",
                retry_after_s=1,
            ) from exc
        raise ApiError(
            ErrorCode.BREAKER_OPEN,
            "searches from this client keep failing; they are paused briefly",
            retry_after_s=max(1, math.ceil(stats.reset_time - self.clock())),
        )

    async def strike(self, client: str) -> bool:
        """Count one for `client`; True if it is the first of its window."""
        try:
            await self.limiter.hit(self.item, "breaker-client", client)
            stats = await self.limiter.get_window_stats(self.item, "breaker-client", client)
        except StorageError:
            return True  # cannot tell whose it is: it counts for everyone
        return bool(stats.remaining == self.item.amount - 1)


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
    """`async with breaker.guard(client): await call()` runs `call` under the
    breaker, or raises ApiError(BREAKER_OPEN) without running it."""

    def __init__(
        self,
        fail_max: int,
        reset_s: float,
        storage: pybreaker.CircuitBreakerStorage | None = None,
        on_state: Callable[[str], None] | None = None,
        clients: ClientStrikes | None = None,
    ) -> None:
        """`clients`: where strikes per client are kept (None: in memory)."""
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
        self.clients = clients or ClientStrikes(MemoryStorage(), fail_max, reset_s)
        self._probe_in_flight = False
        self._probe_due_now = False

    @property
    def state(self) -> str:
        return self.breaker.current_state

    async def check(self, client: str = "") -> None:
        """The refusals `guard` would give now (this client paused, or the
        circuit open with no probe due), without admitting a probe: a request
        the breaker will refuse is refused before it spends the daily budget.
        Without this, a Retriever outage turned every retry into budget spent
        on nothing (10,000 refused searches used up the day's 10,000)."""
        await self.clients.check(client)
        if self.state != pybreaker.STATE_CLOSED and (
            self._probe_in_flight or self._seconds_until_probe() > 0
        ):
            raise self._open_error()

    def retriever_seen_serving(self) -> None:
        """The Retriever answered a health check as serving (/readyz): an open
        circuit sends its probe with the next call instead of at the end of
        `reset_s`. Without this, /readyz said ready while every search was
        refused for up to `reset_s`, so a balancer sent traffic to an instance
        that turned all of it away."""
        if self.state == pybreaker.STATE_OPEN:
            self.breaker.half_open()  # so the probe's success closes it (pybreaker's rule)
        if self.state != pybreaker.STATE_CLOSED:
            self._probe_due_now = True

    @contextlib.asynccontextmanager
    async def guard(self, client: str = "", checked: bool = False) -> AsyncIterator[None]:
        """`checked`: `check(client)` already ran for this request, so its
        strike count (a Redis round trip when shared) is not read again."""
        if not checked:
            await self.clients.check(client)
        probing = self._admit()
        try:
            yield
        except BaseException as exc:
            verdict = blame(exc)
            if verdict is not Blame.UNEXPECTED or await self.clients.strike(client):
                self._record(exc)
            raise
        else:
            self._record(None)
        finally:
            if probing:
                self._probe_in_flight = False

    def _admit(self) -> bool:
        """True when this call is the probe of an open circuit; ApiError
        (BREAKER_OPEN) when the circuit refuses it."""
        if self.state == pybreaker.STATE_CLOSED:
            return False
        if self._probe_in_flight or self._seconds_until_probe() > 0:
            raise self._open_error()
        self._probe_in_flight, self._probe_due_now = True, False
        return True

    def _record(self, outcome: BaseException | None) -> None:
        """Tell pybreaker how a call went; it opens, half-opens and closes
        the circuit (the call itself ran outside it, so that an outcome that
        does not count is not recorded at all)."""

        def report() -> None:
            if outcome is not None:
                raise outcome

        try:
            self.breaker.call(report)
        except pybreaker.CircuitBreakerError:
            pass  # another call opened it meanwhile: nothing to add
        except BaseException as exc:
            if exc is not outcome:
                raise

    def _open_error(self) -> ApiError:
        return ApiError(
            ErrorCode.BREAKER_OPEN,
            "the search backend is failing; requests are paused briefly",
            retry_after_s=max(1, math.ceil(self._seconds_until_probe())),
        )

    def _seconds_until_probe(self) -> float:
        opened_at = self.storage.opened_at
        if opened_at is None or self._probe_due_now:
            return 0.0
        return self.breaker.reset_timeout - (datetime.now(UTC) - opened_at).total_seconds()
