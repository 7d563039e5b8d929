"""What GET /readyz says of the gateway's dependencies: the Retriever's health
and, when the limits are shared, Redis.

/readyz is on the public port, so it is asked at most once per `ttl_s`
however often it is called: before, every request was one health call to the
Retriever, and 3,000 pipelined `GET /readyz` in one 99 KB write became 3,000
calls in 3.7 s, load sent past the rate limits, the budget and the breaker.
A balancer probing every few seconds sees the same answers as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from limits.aio.storage import Storage

from gateway.cached import CachedAnswer
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
        on_serving: Callable[[], None] | None = None,
    ) -> None:
        """`storage`: the shared limits storage to check (None: not shared);
        `on_serving`: told each time the Retriever's health check says serving
        (the breaker, so that ready means searches are let through)."""
        self.retriever, self.storage, self.timeout_s = retriever, storage, timeout_s
        self.on_serving = on_serving
        self._state = CachedAnswer(self._ask, ttl_s, clock)

    async def state(self) -> tuple[bool, str]:
        """(ready?, why not)."""
        return await self._state.get()

    async def _ask(self) -> tuple[bool, str]:
        ready, reason = await self.retriever.is_serving(self.timeout_s)
        if ready and self.on_serving is not None:
            self.on_serving()
        if ready and self.storage is not None and not await _storage_ok(self.storage):
            return False, "redis does not answer"
        return ready, reason


async def _storage_ok(storage: Storage) -> bool:
    try:
        return bool(await storage.check())
    except Exception:  # any failure to answer means not ready
        return False
