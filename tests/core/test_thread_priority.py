"""Index work behind queries: a thread lowers its own CPU priority, threads
it starts inherit it, and a build run at a lower priority returns its result
(or raises its error) in the caller's thread, whose priority stays. Real
threads and the real kernel calls throughout (Linux)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from services.core.thread_priority import (
    built_at_lower_priority,
    lower_this_thread,
    per_thread_nice,
    thread_nice,
)
from services.indexer.worker_threads import WorkerThreads

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not per_thread_nice(), reason="per-thread nice values are Linux's"),
]


def _in_thread(fn: object) -> object:
    box: list[object] = []
    worker = threading.Thread(target=lambda: box.append(fn()))  # type: ignore[operator]
    worker.start()
    worker.join()
    return box[0]


def _own_nice() -> int:
    return thread_nice(threading.get_native_id())


def test_a_thread_lowers_itself_and_never_takes_priority_back() -> None:
    def lower_then_try_to_raise() -> tuple[int, int, int]:
        first = lower_this_thread(7)
        again = lower_this_thread(3)  # lower than now: kept at 7
        return first, again, _own_nice()

    assert _in_thread(lower_then_try_to_raise) == (7, 7, 7)
    assert _in_thread(lambda: (lower_this_thread(0), _own_nice())) == (0, 0)


def test_threads_started_by_a_lowered_build_inherit_its_priority() -> None:
    caller = _own_nice()

    def start_a_pool_thread() -> int:
        seen: list[int] = []
        pool_thread = threading.Thread(target=lambda: seen.append(_own_nice()))
        pool_thread.start()
        pool_thread.join()
        return seen[0]

    assert built_at_lower_priority(start_a_pool_thread, 9) == max(caller, 9)
    assert _own_nice() == caller  # the caller is not lowered
    assert built_at_lower_priority(_own_nice, 0) == caller  # 0: called as it is


def test_a_lowered_build_s_error_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("the export failed")

    with pytest.raises(ValueError, match="the export failed"):
        built_at_lower_priority(fail, 5)


def test_each_index_run_thread_runs_at_the_configured_priority() -> None:
    async def nice_of_a_run(nice: int) -> int:
        return await WorkerThreads(nice=nice).run(_own_nice)

    assert asyncio.run(nice_of_a_run(11)) == max(_own_nice(), 11)
    assert asyncio.run(nice_of_a_run(0)) == _own_nice()
