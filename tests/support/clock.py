"""A clock that tests move by hand (no sleeps): pass it where code takes a
`clock` callable (`Deadline.after(..., clock)`) and set or add to `now`."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
