"""Deferred vector builds brought up to date once runs stop coming.

During a bulk load the embedded vector store defers its HNSW build
(`VectorStore.optimize(settle=False)`): every build merges into the whole
index, so one per run made a load's cost grow with the square of its size.
Nothing tells the Indexer that a load has ended, so the end is taken to be
`delay_s` without a run; then `settle` runs (under the runs' lock, like a run)
and builds what was deferred. Each run re-arms the delay; one arriving while
the settle builds waits for it, as runs wait for one another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger()


class IdleSettle:
    """Calls `settle` once `delay_s` passed since the last `arm()`."""

    def __init__(self, delay_s: float, settle: Callable[[], Awaitable[None]]) -> None:
        self.delay_s = delay_s
        self._settle = settle
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def disarm(self) -> None:
        """A run starts: no settle until it ends (and re-arms)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def arm(self) -> None:
        """A run ended: the settle is due `delay_s` from now, unless another
        run starts first."""
        self.disarm()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.delay_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            await self._settle()
        except Exception as exc:  # logged: the data is committed, only speed waits
            log.warning("vector_settle_failed", error=str(exc))

    def cancel(self) -> None:
        """Stopping: no settle starts from now on (one already in its thread
        is a run like any other for the shutdown grace)."""
        self.disarm()
        if self._task is not None and not self._task.done():
            self._task.cancel()
