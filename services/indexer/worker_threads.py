"""Blocking index work off the event loop, in threads a stopping process
need not wait for.

`asyncio.to_thread` runs work in the loop's default executor, whose threads
are joined when `asyncio.run` ends and again at interpreter exit: a run that
never returned (a document that made the chunker spin, a store call that
hung) kept a stopped Indexer alive until SIGKILL. Here each run has a daemon
thread, and `settle(timeout)` tells the app whether every run ended in time;
one that did not is abandoned when the process exits, and the journal's
recovery at the next start undoes whatever it had written (see transactions).
Each run's thread runs at the nice value given (services.core.thread_priority:
queries first while an ingest shares the cores).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from services.core.thread_priority import lower_this_thread

T = TypeVar("T")


class WorkerThreads:
    """Runs blocking calls in daemon threads and keeps track of them."""

    def __init__(self, name: str = "index-run", nice: int = 0) -> None:
        self._name = name
        self._nice = nice
        self._running: set[asyncio.Future[Any]] = set()

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` in its own thread, with the caller's context
        (request id, trace span) as `asyncio.to_thread` would give it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def target() -> None:
            lower_this_thread(self._nice)
            try:
                result = context.run(fn, *args, **kwargs)
            except BaseException as exc:  # handed to the awaiting coroutine
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)

        self._running.add(future)
        future.add_done_callback(self._running.discard)
        threading.Thread(target=target, name=self._name, daemon=True).start()
        return await future

    @property
    def busy(self) -> int:
        return len(self._running)

    async def settle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for every run to end; False if one still runs."""
        pending = set(self._running)
        if not pending:
            return True
        _, still_running = await asyncio.wait(pending, timeout=timeout_s)
        return not still_running


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # its awaiting coroutine was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
