"""`Coalescer`: concurrent callers' items as one call. The batched function
is a fake (labelled: it records its calls and can be held or made to fail),
since what is tested is the hand-over between threads."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from services.core.coalescing import Coalescer

pytestmark = pytest.mark.unit


class HeldTimesTen:
    """FAKE batched function: each item times ten; the first call waits
    until `release` is set, so that others queue behind it."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[list[int]] = []
        self.entered, self.release = threading.Event(), threading.Event()
        self.fail_on = fail_on

    def __call__(self, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        if len(self.calls) == 1:
            self.entered.set()
            assert self.release.wait(10)
        if self.fail_on in items:
            raise ValueError(f"failed on {self.fail_on}")
        return [item * 10 for item in items]


def queue_behind_a_running_batch(
    coalescer: Coalescer[int, int],
    fake: HeldTimesTen,
    pool: ThreadPoolExecutor,
    later: list[list[int]],
) -> tuple[Future[list[int]], list[Future[list[int]]]]:
    first = pool.submit(coalescer.submit, [1])
    assert fake.entered.wait(10)
    waiting = []
    for count, items in enumerate(later, start=1):
        waiting.append(pool.submit(coalescer.submit, items))
        _until(lambda: coalescer.stats().waiting == count)  # noqa: B023 - called at once
    fake.release.set()
    return first, waiting


def _until(condition, within_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.001)


def test_a_caller_alone_runs_at_once_with_its_own_items() -> None:
    coalescer = Coalescer(lambda items: [i * 10 for i in items], max_items=8)
    assert coalescer.submit([1, 2]) == [10, 20]
    assert coalescer.submit([]) == []
    stats = coalescer.stats()
    assert (stats.calls, stats.items, stats.largest) == (1, 2, 2)


def test_callers_that_arrive_during_a_batch_share_the_next_call() -> None:
    fake = HeldTimesTen()
    coalescer = Coalescer(fake, max_items=8)
    with ThreadPoolExecutor(4) as pool:
        first, waiting = queue_behind_a_running_batch(coalescer, fake, pool, [[2], [3, 4], [5]])
        assert first.result(10) == [10]
        assert [f.result(10) for f in waiting] == [[20], [30, 40], [50]]
    assert fake.calls == [[1], [2, 3, 4, 5]]  # arrival order, each caller whole
    assert coalescer.stats().largest == 4


def test_a_batch_holds_at_most_max_items_and_the_queue_is_served_in_order() -> None:
    fake = HeldTimesTen()
    coalescer = Coalescer(fake, max_items=2)
    with ThreadPoolExecutor(5) as pool:
        _, waiting = queue_behind_a_running_batch(coalescer, fake, pool, [[2], [3], [4]])
        assert [f.result(10) for f in waiting] == [[20], [30], [40]]
    assert fake.calls == [[1], [2, 3], [4]]


def test_an_error_reaches_every_caller_of_its_batch_and_no_other() -> None:
    fake = HeldTimesTen(fail_on=3)
    coalescer = Coalescer(fake, max_items=2)
    with ThreadPoolExecutor(5) as pool:
        first, waiting = queue_behind_a_running_batch(coalescer, fake, pool, [[2], [3], [4]])
        assert first.result(10) == [10]
        for future in waiting[:2]:  # [2] and [3] shared the failing call
            with pytest.raises(ValueError, match="failed on 3"):
                future.result(10)
        assert waiting[2].result(10) == [40]


def test_a_function_that_loses_results_is_an_error_not_a_wrong_answer() -> None:
    coalescer = Coalescer(lambda items: items[:-1], max_items=4)
    with pytest.raises(RuntimeError, match="1 results for 2 items"):
        coalescer.submit([1, 2])


def test_max_items_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_items"):
        Coalescer(lambda items: items, max_items=0)
