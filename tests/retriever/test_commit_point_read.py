"""A re-read of the commit point that cannot finish (the PostgreSQL `meta`
row locked by a stuck transaction) must not use the whole request's deadline
when a last value is there to fall back on: the search still has to run."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.core.deadline import Deadline
from services.core.models import ScopeFilter
from services.retriever.prepare import CommittedScope
from services.storage.visibility import CommittedGeneration

pytestmark = pytest.mark.unit


class _LockedMeta:
    """A labelled fake, to inject the fault: the first read answers, later
    reads wait on a lock until their deadline, as a statement_timeout would end them."""

    def __init__(self) -> None:
        self.reads: list[Deadline] = []
        self.released = threading.Event()

    def __call__(self, deadline: Deadline) -> int:
        self.reads.append(deadline)
        if len(self.reads) > 1:
            self.released.wait(deadline.budget())
            raise TimeoutError("statement timeout")
        return 7


def test_a_stuck_re_read_gets_half_the_time_left_and_the_last_value_is_served() -> None:
    meta = _LockedMeta()
    clock = [0.0]
    committed = CommittedGeneration(meta, refresh_s=1.0, clock=lambda: clock[0])
    assert committed.current(Deadline.after(5.0)) == 7
    clock[0] = 2.0  # the cached value is due for a re-read
    with ThreadPoolExecutor(2) as executor:
        scope = CommittedScope(committed, executor)
        deadline = Deadline.after(2.0)
        visible = asyncio.run(scope.visible(ScopeFilter(scope_id="s"), deadline))
        meta.released.set()
    assert visible.visible_generation == 7
    re_read = meta.reads[1]
    assert re_read.at is not None and deadline.at is not None
    # About half of the 2 s left (1 s of slack for a slow event loop), not all of it.
    assert re_read.at < deadline.at - 0.5


def test_a_stuck_re_read_takes_no_longer_than_a_channel_search() -> None:
    # With PostgreSQL stopped, a 5 s Retrieve waited 2.5 s for the commit
    # point before its channels could even start.
    meta = _LockedMeta()
    clock = [0.0]
    committed = CommittedGeneration(meta, refresh_s=1.0, clock=lambda: clock[0])
    assert committed.current(Deadline.after(5.0)) == 7
    clock[0] = 2.0
    with ThreadPoolExecutor(2) as executor:
        scope = CommittedScope(committed, executor, max_reread_s=0.3)
        deadline = Deadline.after(5.0)
        visible = asyncio.run(scope.visible(ScopeFilter(scope_id="s"), deadline))
        meta.released.set()
    assert visible.visible_generation == 7
    re_read = meta.reads[1]
    assert re_read.at is not None and deadline.at is not None
    assert re_read.at <= deadline.at - 4.0  # about 0.3 s of the 5, not 2.5


def test_without_a_last_value_the_first_read_may_take_the_whole_deadline() -> None:
    meta = _LockedMeta()
    meta.reads.append(Deadline.never())  # the next read is a stuck one
    committed = CommittedGeneration(meta)
    with ThreadPoolExecutor(2) as executor:
        scope = CommittedScope(committed, executor)
        deadline = Deadline.after(0.2)
        with pytest.raises(Exception, match=r"commit point|statement timeout"):
            asyncio.run(scope.visible(ScopeFilter(scope_id="s"), deadline))
        meta.released.set()
    assert meta.reads[1].at == deadline.at


class _HungMeta:
    """A labelled fake, to inject the fault: a stopped PostgreSQL server. The
    first read answers; later ones never return by themselves (no statement
    timeout fires in a server that does not run) until the test releases them."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def __call__(self, deadline: Deadline) -> int:
        self.calls += 1
        if self.calls > 1:
            self.release.wait()
        return 7


def test_a_read_that_hangs_never_blocks_the_event_loop() -> None:
    # Probe: with PostgreSQL stopped (SIGSTOP), a re-read held the lock that
    # `cached()` takes on the event loop: the Retriever answered nothing, every
    # call ending DEADLINE_EXCEEDED, until the server ran again.
    meta = _HungMeta()
    clock = [0.0]
    committed = CommittedGeneration(meta, refresh_s=1.0, clock=lambda: clock[0])
    scope = CommittedScope(committed, ThreadPoolExecutor(max_workers=4))
    assert asyncio.run(scope.visible(ScopeFilter(), Deadline.after(5))).visible_generation == 7
    clock[0] = 2.0  # due for a re-read
    hung = threading.Thread(target=committed.current, args=(Deadline.never(),), daemon=True)
    hung.start()
    while meta.calls < 2:  # the re-read is under way and holds on
        threading.Event().wait(0.01)

    async def two_requests() -> list[int | None]:
        answers = []
        for _ in range(2):
            visible = await scope.visible(ScopeFilter(), Deadline.after(0.4))
            answers.append(visible.visible_generation)
        return answers

    try:
        assert committed.cached() is None and committed.last() == 7  # no wait on the read
        assert asyncio.run(two_requests()) == [7, 7]  # the last value, within each deadline
        committed.advance(8)  # an in-process commit is not held up either
        assert committed.cached() == 8
    finally:
        meta.release.set()
        hung.join(5)
