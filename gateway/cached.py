"""An answer asked of a dependency at most once per TTL, however many
requests want it at once (the release gate, /readyz)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class CachedAnswer(Generic[T]):
    def __init__(
        self,
        ask: Callable[[], Awaitable[T]],
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ask, self.ttl_s, self.clock = ask, ttl_s, clock
        self._lock = asyncio.Lock()
        self._answer: T | None = None
        self._asked_at = 0.0

    async def get(self) -> T:
        async with self._lock:  # one call per expiry, however many requests wait
            if self._answer is None or self.clock() - self._asked_at >= self.ttl_s:
                self._answer = await self.ask()
                self._asked_at = self.clock()
            return self._answer
