"""A call's deadline as a value: a point on the monotonic clock.

Made once per call (from the per-call value or the settings' default) and
shared by every attempt of that call, so retries spend the same budget: each
attempt is sent with the *remaining* time as its gRPC timeout, and no retry
starts once the remaining time cannot cover its backoff."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]
MAX_DEADLINE_S = 24 * 3600  # also the longest ClientSettings.timeout


def finite(value: float) -> bool:
    """math.isfinite, False for an int too large for a float (10**400 raised a
    raw OverflowError, probe)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


@dataclass(frozen=True)
class Deadline:
    """`Deadline.after(2.0)`: two seconds from now. Immutable."""

    expires_at: float  # on `clock`'s scale (time.monotonic by default)
    clock: Clock = field(default=time.monotonic, repr=False, compare=False)

    @classmethod
    def after(cls, seconds: float, clock: Clock = time.monotonic) -> Deadline:
        if not isinstance(seconds, int | float) or isinstance(seconds, bool):
            raise TypeError(f"deadline: expected seconds as a number, got {seconds!r}")
        if not finite(seconds) or seconds <= 0:
            raise ValueError(f"deadline: {seconds!r} is not a positive number of seconds")
        if seconds > MAX_DEADLINE_S:
            # gRPC's own timeout overflows far beyond (1e10 s failed at once as
            # DEADLINE_EXCEEDED without a call); a day is the settings' bound too.
            raise ValueError(f"deadline: {seconds!r} s is over the {MAX_DEADLINE_S} s limit")
        return cls(clock() + float(seconds), clock)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.expires_at - self.clock())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0


def resolve(deadline: Deadline | float | None, default_seconds: float) -> Deadline:
    """The deadline of one call: as given, seconds from now, or the default."""
    if isinstance(deadline, Deadline):
        return deadline
    return Deadline.after(default_seconds if deadline is None else deadline)
