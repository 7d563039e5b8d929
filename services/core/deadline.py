"""Deadlines as values, not floats and arithmetic.

Every stage of a request asks the same question: "how long may this step
take?" The answer is always the smaller of the step's own cap and the time
left, less what the rest of the request still needs afterwards (the reply's
trip back, the commit). `Deadline` answers it in one place:

    deadline = Deadline.from_grpc(context, default_s=2.0)   # the caller's, or ours
    budget = deadline.budget(cap_s=0.3, margin_s=0.01)      # min(cap, left − margin)
    await client.call(..., timeout=budget)

A deadline is a point on the monotonic clock; `None` (`Deadline.never()`)
means the caller set none. The clock can be replaced, which keeps the tests
of time-dependent code free of sleeps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

Clock = Callable[[], float]


class HasTimeRemaining(Protocol):
    """What a grpc (aio or sync) servicer context offers."""

    def time_remaining(self) -> float | None: ...


@dataclass(frozen=True)
class Deadline:
    """A point on the monotonic clock (`at`, seconds), or none (`at` is None)."""

    at: float | None
    clock: Clock = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def after(cls, seconds: float, clock: Clock = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock)

    @classmethod
    def never(cls, clock: Clock = time.monotonic) -> Deadline:
        return cls(None, clock)

    @classmethod
    def within(cls, seconds: float | None, clock: Clock = time.monotonic) -> Deadline:
        """`seconds` from now, or no deadline when `seconds` is None."""
        return cls.never(clock) if seconds is None else cls.after(seconds, clock)

    @classmethod
    def from_grpc(
        cls,
        context: HasTimeRemaining,
        default_s: float | None = None,
        clock: Clock = time.monotonic,
    ) -> Deadline:
        """The caller's deadline, capped at `default_s` (also used when the
        caller set none): a server never works longer than it is configured
        to, whatever a client asks for."""
        remaining = context.time_remaining()
        if remaining is None:
            return cls.within(default_s, clock)
        if default_s is not None:
            remaining = min(remaining, default_s)
        return cls.after(remaining, clock)

    @property
    def bounded(self) -> bool:
        return self.at is not None

    def remaining_s(self) -> float:
        """Seconds left (negative once passed; infinite without a deadline)."""
        return math.inf if self.at is None else self.at - self.clock()

    def expired(self, margin_s: float = 0.0) -> bool:
        """True when less than `margin_s` is left."""
        return self.remaining_s() <= margin_s

    def budget(self, cap_s: float = math.inf, margin_s: float = 0.0) -> float:
        """How long a step may take: min(cap, time left − margin), never below 0.
        Infinite only when there is neither a cap nor a deadline."""
        return max(0.0, min(cap_s, self.remaining_s() - margin_s))

    def shortened(self, margin_s: float) -> Deadline:
        """This deadline, `margin_s` earlier (time kept for what comes after)."""
        return self if self.at is None else Deadline(self.at - margin_s, self.clock)

    def capped(self, cap_s: float) -> Deadline:
        """This deadline or `cap_s` from now, whichever comes first: what a
        step with its own cap hands to the calls it makes."""
        budget = self.budget(cap_s)
        return self if math.isinf(budget) else Deadline(self.clock() + budget, self.clock)

    def on_monotonic_clock(self) -> float | None:
        """The same point as a time.monotonic() value (whatever this deadline's
        clock), for code that waits on the real clock; None without a deadline."""
        return None if self.at is None else time.monotonic() + self.remaining_s()

    def timeout_or_none(self, margin_s: float = 0.0) -> float | None:
        """A timeout for an API that takes None as "no timeout"."""
        return None if self.at is None else self.budget(margin_s=margin_s)
