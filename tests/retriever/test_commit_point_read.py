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
