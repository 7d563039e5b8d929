"""What GET /readyz says of the gateway's dependencies: the Retriever's health
and, when the limits are shared, Redis.

/readyz is on the public port, so it is asked at most once per `ttl_s`
however often it is called: before, every request was one health call to the
Retriever, and 3,000 pipelined `GET /readyz` in one 99 KB write became 3,000
calls in 3.7 s, load sent past the rate limits, the budget and the breaker.
A balancer probing every few seconds sees the same answers as before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from limits.aio.storage import Storage

from gateway.retriever_client import RetrieverClient

READINESS_TTL_S = 1.0


class Readiness:
    def __init__(
        self,
        retriever: RetrieverClient,
        storage: Storage | None,
        timeout_s: float,
        ttl_s: float = READINESS_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`storage`: the shared limits storage to check (None: not shared)."""
        self.retriever, self.storage = retriever, storage
        self.timeout_s, self.ttl_s, self.clock = timeout_s, ttl_s, clock
        self._lock = asyncio.Lock()
        self._state: tuple[bool, str] | None = None
        self._asked_at = 0.0

    async def state(self) -> tuple[bool, str]:
        """(ready?, why not)."""
        async with self._lock:  # one question per expiry, however many requests wait
            if self._state is None or self.clock() - self._asked_at >= self.ttl_s:
                self._state = await self._ask()
                self._asked_at = self.clock()
            return self._state

    async def _ask(self) -> tuple[bool, str]:
        ready, reason = await self.retriever.is_serving(self.timeout_s)
        if ready and self.storage is not None and not await _storage_ok(self.storage):
            return False, "redis does not answer"
        return ready, reason


async def _storage_ok(storage: Storage) -> bool:
    try:
        return bool(await storage.check())
    except Exception:  # any failure to answer means not ready
        return False
