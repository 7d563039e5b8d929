"""Whether the Reranker is serving, so the Retriever stops calling one that is not.

A Reranker without a loaded model keeps its health NOT_SERVING and refuses
every Rerank call; asking it on every Retrieve costs each request a round trip
and the Reranker a refusal per call. `RerankerHealth` remembers the refusal:

    serving ──Rerank fails UNAVAILABLE / FAILED_PRECONDITION──▶ down
    down ──health Check after the backoff says SERVING──▶ serving, backoff reset
    down ──health Check says anything else──▶ down, backoff doubled (≤ max)
    any Rerank success ──▶ serving, backoff back to its initial value

`should_call()` is a field read: the health Check runs in a background task,
so no Retrieve ever waits for it. A DEADLINE_EXCEEDED does not count: a slow
Reranker is loaded, not absent, and the rerank budget already bounds it.
Each change of state is logged once, never per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import grpc

from services.core.deadline import Clock
from services.core.logging import get_logger

log = get_logger(__name__)

# Ask the health service whether the Reranker serves; the argument is the
# Check's timeout in seconds. `RerankClient.check_health` is one.
HealthCheck = Callable[[float], Awaitable[bool]]
Sleep = Callable[[float], Awaitable[None]]

# The statuses that mean "not serving" or "cannot be reached": anything else
# (INTERNAL, INVALID_ARGUMENT, DEADLINE_EXCEEDED…) concerns one call only.
NOT_SERVING_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION})


class RerankerHealth:
    """Tracks whether the Reranker is serving; see the module docstring."""

    def __init__(
        self,
        check: HealthCheck,
        *,
        initial_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        check_timeout_s: float = 0.5,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """`clock` and `sleep` must agree (both real, or both fakes in tests)."""
        if not 0 < initial_backoff_s <= max_backoff_s:
            raise ValueError("need 0 < initial_backoff_s <= max_backoff_s")
        self._check = check
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self.check_timeout_s = check_timeout_s
        self._clock = clock
        self._sleep = sleep
        # Believed serving until told otherwise: without start() this behaves
        # as if there were no tracker (every request calls the Reranker).
        self._serving = True
        self._backoff_s = initial_backoff_s
        self._next_probe_at = 0.0
        self._down_since = 0.0
        self._prober: asyncio.Task[None] | None = None
        self._stopped = False

    # --- what callers read (cheap, no I/O) ------------------------------------

    @property
    def serving(self) -> bool:
        return self._serving

    @property
    def backoff_s(self) -> float:
        """The wait before the next health Check once down."""
        return self._backoff_s

    def should_call(self) -> bool:
        """Call the Reranker now? False while it is believed down."""
        return self._serving

    def next_probe_in_s(self) -> float:
        """Seconds until the next health Check (0 while serving, or while due)."""
        return 0.0 if self._serving else max(0.0, self._next_probe_at - self._clock())

    # --- what the rerank step reports ------------------------------------------

    def record_success(self) -> None:
        """The Reranker answered a Rerank call: it serves, and the backoff resets."""
        self._backoff_s = self.initial_backoff_s
        if not self._serving:
            self._mark_serving("rerank call succeeded")

    def record_failure(self, code: grpc.StatusCode) -> None:
        """A Rerank call failed with `code`; only a not-serving code marks it down."""
        if code in NOT_SERVING_CODES and self._serving:
            self._mark_down(f"rerank call: {code.name}")

    # --- lifecycle --------------------------------------------------------------

    async def start(self) -> None:
        """Ask once now, so a Retriever that starts beside a Reranker still
        loading its model knows it before the first request."""
        self._stopped = False
        await self.probe()

    async def stop(self) -> None:
        """Cancel the background health Check, if any."""
        self._stopped = True
        prober, self._prober = self._prober, None
        if prober is not None:
            prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await prober

    # --- state changes (each logged once) ----------------------------------------

    def _mark_down(self, why: str) -> None:
        self._serving = False
        self._down_since = self._clock()
        self._next_probe_at = self._down_since + self._backoff_s
        log.warning("reranker_not_serving", reason=why, recheck_in_s=self._backoff_s)
        self._ensure_prober()

    def _mark_serving(self, why: str) -> None:
        self._serving = True
        # The next outage starts from the shortest wait again.
        self._backoff_s = self.initial_backoff_s
        self._drop_prober()
        down_s = self._clock() - self._down_since
        log.info("reranker_serving_again", reason=why, down_s=round(down_s, 3))

    def _ensure_prober(self) -> None:
        if self._stopped or (self._prober is not None and not self._prober.done()):
            return
        # Called from the event loop (RerankStep.run, start()); the task is
        # kept so it is neither garbage-collected nor left running by stop().
        self._prober = asyncio.get_running_loop().create_task(self._probe_until_serving())

    def _drop_prober(self) -> None:
        """A prober asleep on an old schedule must not outlive the outage it was
        for: the next one starts afresh from the backoff then current."""
        prober, self._prober = self._prober, None
        if prober is not None and prober is not asyncio.current_task():
            prober.cancel()

    # --- the background health Check ---------------------------------------------

    async def _probe_until_serving(self) -> None:
        while not self._serving:
            await self._sleep(self.next_probe_in_s())
            if self._serving:  # a Rerank call succeeded meanwhile
                return
            await self.probe()

    async def probe(self) -> bool:
        """One health Check now, and its consequence: SERVING resumes calls;
        anything else marks it down, or, when already down, doubles the backoff
        (up to the max) and schedules the next Check."""
        serving = await self._ask()
        if serving:
            if not self._serving:
                self._mark_serving("health check: SERVING")
        elif self._serving:
            self._mark_down("health check: not serving")
        else:
            self._backoff_s = min(self._backoff_s * 2, self.max_backoff_s)
            self._next_probe_at = self._clock() + self._backoff_s
        return serving

    async def _ask(self) -> bool:
        try:
            return await self._check(self.check_timeout_s)
        except Exception as exc:  # a broken check must not end the background task
            log.debug("reranker_health_check_failed", error=f"{type(exc).__name__}: {exc}")
            return False
