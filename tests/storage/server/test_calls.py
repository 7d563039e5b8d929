"""`ServerCallPolicy`: a transient write failure is retried with backoff,
never into the caller's deadline (a manual clock, no sleeps)."""

from __future__ import annotations

import pytest

from services.core.deadline import Deadline
from services.core.errors import StoreUnavailable
from services.storage.base import unrequested_deadline
from services.storage.server.calls import ServerCallPolicy
from tests.support.clock import ManualClock

pytestmark = pytest.mark.unit


class FlakyServer:
    """FAULT INJECTION: every call fails as unreachable, taking `call_s` of
    the manual clock."""

    def __init__(self, clock: ManualClock, call_s: float = 0.0) -> None:
        self.clock, self.call_s, self.calls = clock, call_s, 0

    def __call__(self) -> None:
        self.calls += 1
        self.clock.now += self.call_s
        raise ConnectionError("connection refused")


def policy(backoff_s: float) -> ServerCallPolicy:
    return ServerCallPolicy("test", lambda exc: True, write_attempts=4, backoff_initial_s=backoff_s)


def test_no_retry_whose_backoff_would_end_past_the_deadline() -> None:
    clock = ManualClock()
    server = FlakyServer(clock)
    with pytest.raises(StoreUnavailable, match="connection refused"):
        # The first backoff (0.2 s plus jitter) is longer than the 0.1 s left.
        policy(0.2).write("upsert", server, Deadline.after(0.1, clock))
    assert server.calls == 1


def test_retries_stop_when_the_attempts_used_the_deadline_up() -> None:
    clock = ManualClock()
    server = FlakyServer(clock, call_s=4.0)
    with pytest.raises(StoreUnavailable):
        policy(0.0).write("upsert", server, Deadline.after(10.0, clock))
    assert server.calls == 3  # at 12 s the deadline (10 s) has passed: no 4th attempt


def test_without_a_deadline_every_attempt_is_made() -> None:
    clock = ManualClock()
    server = FlakyServer(clock, call_s=4.0)
    with pytest.raises(StoreUnavailable):
        policy(0.0).write("upsert", server, deadline=unrequested_deadline())
    assert server.calls == 4
