"""When a run must stop before it commits: its caller's deadline is about to
pass, or its caller went away.

A run that commits after its caller was told DEADLINE_EXCEEDED is worse than
one that fails: the caller retries, or gives up believing nothing changed.
So the pipeline asks `RunControl.check()` between write batches and once
more right before the commit, and undoes everything when told to stop. The
deadline also travels with every store call of the run (`write_deadline` for
the writes, the deadline itself for the commit), so a server write never
waits past it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from services.core.deadline import Clock, Deadline
from services.core.errors import Cancelled, DeadlineExceeded

# Left for the commit itself and the answer to travel back: a commit with less
# time than this could land after the caller's deadline.
COMMIT_MARGIN_S = 0.25


@dataclass
class RunControl:
    """The caller's deadline (`Deadline.never()`: none) and a cancellation flag."""

    deadline: Deadline = field(default_factory=Deadline.never)
    _cancelled: threading.Event = field(default_factory=threading.Event)
    _created_at: float = field(init=False)

    def __post_init__(self) -> None:
        self._created_at = self.deadline.clock()

    @classmethod
    def within(cls, seconds: float | None, clock: Clock = time.monotonic) -> RunControl:
        return cls(Deadline.within(seconds, clock))

    def cancel(self) -> None:
        """Thread-safe: called from the RPC's done-callback on the event loop."""
        self._cancelled.set()

    def check(self, margin_s: float = 0.0) -> None:
        """Raise if the run must stop; `margin_s`: time still needed after this."""
        if self._cancelled.is_set():
            raise Cancelled("the caller went away before the run committed; it was undone")
        if self.deadline.expired(margin_s):
            raise DeadlineExceeded(
                "the caller's deadline passed before the run committed; it was undone "
                "and nothing was committed (send fewer documents per call, or allow more time)"
            )

    def check_start(self) -> None:
        """Before a run starts (it waited for the write lock): one left with
        less than the commit's margin could write nothing in time. Said as
        what happened, not as a store's deadline."""
        if self._cancelled.is_set():
            raise Cancelled("the caller went away while the run waited; nothing was written")
        if self.deadline.expired(COMMIT_MARGIN_S):
            waited = self.deadline.clock() - self._created_at
            given = (self.deadline.at or 0.0) - self._created_at
            if given < COMMIT_MARGIN_S:
                # Short from the start, not by waiting (probe: a 200 ms call
                # was told it had waited behind earlier runs).
                raise DeadlineExceeded(
                    f"the call's deadline ({given * 1000:.0f} ms) is shorter than the "
                    f"{COMMIT_MARGIN_S * 1000:.0f} ms a run keeps to commit; nothing was written "
                    f"(allow more than {COMMIT_MARGIN_S * 1000:.0f} ms)"
                )
            raise DeadlineExceeded(
                f"the run waited {waited * 1000:.0f} ms behind earlier runs (writes are "
                "serialised) and had no time left to write; nothing was written (allow more "
                "time, or send fewer concurrent writes)"
            )

    def check_commit(self) -> None:
        self.check(COMMIT_MARGIN_S)

    def write_deadline(self) -> Deadline:
        """What the run's store writes get: its deadline less the commit's
        margin (a write that ends later leaves no time to commit)."""
        return self.deadline.shortened(COMMIT_MARGIN_S)
