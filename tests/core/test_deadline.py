"""`Deadline`: the one answer to "how long may this step take?"."""

from __future__ import annotations

import math

import pytest

from services.core.deadline import Deadline
from tests.support.clock import ManualClock

pytestmark = pytest.mark.unit


class Context:
    def __init__(self, remaining: float | None) -> None:
        self.remaining = remaining

    def time_remaining(self) -> float | None:
        return self.remaining


def test_budget_is_the_cap_or_the_time_left_less_the_margin() -> None:
    clock = ManualClock()
    deadline = Deadline.after(1.0, clock)
    assert deadline.budget(cap_s=0.3, margin_s=0.01) == pytest.approx(0.3)
    clock.now += 0.8
    assert deadline.budget(cap_s=0.3, margin_s=0.01) == pytest.approx(0.19)
    clock.now += 0.5
    assert deadline.budget(cap_s=0.3) == 0.0
    assert deadline.expired()


def test_no_deadline_leaves_only_the_cap() -> None:
    never = Deadline.never()
    assert never.budget(cap_s=0.3, margin_s=0.01) == 0.3
    assert never.budget() == math.inf
    assert not never.expired() and never.timeout_or_none() is None


def test_the_callers_deadline_is_capped_by_the_servers_own() -> None:
    clock = ManualClock()
    assert Deadline.from_grpc(Context(10.0), 2.0, clock).remaining_s() == pytest.approx(2.0)
    assert Deadline.from_grpc(Context(0.5), 2.0, clock).remaining_s() == pytest.approx(0.5)
    assert Deadline.from_grpc(Context(None), 2.0, clock).remaining_s() == pytest.approx(2.0)
    assert not Deadline.from_grpc(Context(None), None, clock).bounded


def test_shortened_keeps_time_for_what_comes_after() -> None:
    clock = ManualClock()
    deadline = Deadline.after(1.0, clock).shortened(0.25)
    assert deadline.remaining_s() == pytest.approx(0.75)
    assert deadline.expired(margin_s=0.8)
    assert Deadline.never().shortened(1.0).at is None


def test_capped_is_the_sooner_of_the_deadline_and_the_cap() -> None:
    clock = ManualClock()
    deadline = Deadline.after(1.0, clock)
    assert deadline.capped(0.3).remaining_s() == pytest.approx(0.3)
    assert deadline.capped(5.0).remaining_s() == pytest.approx(1.0)
    assert Deadline.never(clock).capped(0.5).remaining_s() == pytest.approx(0.5)
    assert Deadline.never(clock).capped(math.inf).at is None
    clock.now += 2.0
    assert deadline.capped(0.3).expired()
