"""Coalescing of concurrent calls into one (leader/follower), for work whose
batch costs less than its parts: vector searches that share one pass over
an index's segments (`services.retriever.vector_batching`).

The same discipline as the query-embedding batcher (`query_batching`):

- a caller that finds no batch running runs at once, alone: no timer, no
  added latency when calls do not overlap;
- callers that arrive while a batch runs queue up; when it ends, one of them
  leads and runs every waiting caller's items (oldest first, up to
  `max_items`) as one call, then hands each caller its results;
- an error in a batch reaches every caller whose items were in it;
- the leader keeps leading until its own items are done, then hands over,
  so a long queue is served in arrival order.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class CoalescingStats:
    """Calls made to the batched function, items they carried, the largest;
    callers waiting right now."""

    calls: int = 0
    items: int = 0
    largest: int = 0
    waiting: int = 0


class _Pending(Generic[Item, Result]):
    __slots__ = ("done", "error", "items", "results")

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.results: list[Result] = []
        self.error: BaseException | None = None
        self.done = False

    def outcome(self) -> list[Result]:
        if self.error is not None:
            raise self.error
        return self.results


class Coalescer(Generic[Item, Result]):
    """Runs `run(items) -> results` (same length, same order) over the items
    of every caller waiting, one call at a time."""

    def __init__(self, run: Callable[[list[Item]], list[Result]], max_items: int) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, got {max_items}")
        self._run, self.max_items = run, max_items
        self._changed = threading.Condition()
        self._waiting: deque[_Pending[Item, Result]] = deque()
        self._leading = False
        self._stats = CoalescingStats()

    def submit(self, items: Sequence[Item]) -> list[Result]:
        """This caller's results, computed alone or with other callers'."""
        mine: _Pending[Item, Result] = _Pending(list(items))
        if not mine.items:
            return []
        with self._changed:
            self._waiting.append(mine)
            while self._leading and not mine.done:
                self._changed.wait()
            if mine.done:
                return mine.outcome()
            self._leading = True
        try:
            while not mine.done:
                self._run_batch(self._take())
        finally:
            with self._changed:
                self._leading = False
                self._changed.notify_all()
        return mine.outcome()

    def stats(self) -> CoalescingStats:
        with self._changed:
            return replace(self._stats, waiting=len(self._waiting))

    def _take(self) -> list[_Pending[Item, Result]]:
        """The oldest waiting callers, whole, up to `max_items` items (the
        first caller always, however many it brought)."""
        taken: list[_Pending[Item, Result]] = []
        count = 0
        with self._changed:
            while self._waiting and (
                not taken or count + len(self._waiting[0].items) <= self.max_items
            ):
                taken.append(self._waiting.popleft())
                count += len(taken[-1].items)
        return taken

    def _run_batch(self, taken: list[_Pending[Item, Result]]) -> None:
        flat = [item for pending in taken for item in pending.items]
        results: list[Result] = []
        error: BaseException | None = None
        try:
            results = self._run(flat)
            if len(results) != len(flat):
                raise RuntimeError(f"{len(results)} results for {len(flat)} items")
        except BaseException as exc:  # handed to every caller in the batch
            error = exc
        with self._changed:
            start = 0
            for pending in taken:
                pending.error = error
                pending.results = results[start : start + len(pending.items)]
                start += len(pending.items)
                pending.done = True
            self._stats = CoalescingStats(
                self._stats.calls + 1,
                self._stats.items + len(flat),
                max(self._stats.largest, len(flat)),
            )
            self._changed.notify_all()
