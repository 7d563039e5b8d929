"""Which rows `Retrieve` may see: those of committed runs only.

Every row a run writes (new text, a payload rewrite) carries the run's
`generation`; the manifest's `committed_generation` advances, in the same
transaction as the run's manifest entries, when the run commits. Searches
exclude rows whose generation is above the committed one, so a row written
by a run that has not committed, or never will (it crashed, its deadline
passed), is invisible from the moment it is written, including between a
crash and the recovery that removes it. Rows written before generations
existed have none and count as committed.

Why a filter and not recover-before-serve alone: in server mode the
Retriever is another process that keeps serving while an Indexer is down,
and even in one process a live run's rows would be served before its
commit. The filter is one range clause per search (measured cost in
docs/indexing.md).

`CommittedGeneration` is the Retriever's view of that number: pushed by the
Indexer when both run in one process, re-read from the manifest at most
every `refresh_s` otherwise (a stale view only hides a newer commit for that
long; it can never show an uncommitted row). A Retrieve that has to re-read
it does so within its deadline (`current(deadline)`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded
from services.storage.manifest import Manifest

COMMITTED_GENERATION_META = "committed_generation"
RELEASE_META = "release"


def committed_generation(manifest: Manifest, deadline: Deadline) -> int:
    return int(manifest.get_meta(COMMITTED_GENERATION_META, deadline) or 0)


class CommittedGeneration:
    """A cached reading of the manifest's committed generation."""

    def __init__(
        self,
        read: Callable[[Deadline], int],
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._refresh_s = refresh_s
        self._clock = clock
        # Two locks: `_reading` is held through a read of the manifest (one at
        # a time), `_state` only to look at or set the value. A caller on an
        # event loop (`cached`, `advance`) takes `_state` alone, so a read
        # that hangs on a stalled store can never block the loop: with one
        # lock for both, a PostgreSQL stopped mid-read froze every request
        # of the Retriever past its deadline (probe).
        self._reading = threading.Lock()
        self._state = threading.Lock()
        self._value: int | None = None
        self._read_at = 0.0

    @classmethod
    def of(cls, manifest: Manifest, refresh_s: float = 1.0) -> CommittedGeneration:
        return cls(lambda deadline: committed_generation(manifest, deadline), refresh_s)

    def current(self, deadline: Deadline) -> int:
        """The committed generation; a failed re-read keeps the last value
        (hiding newer rows a little longer is safe), but the first read must
        succeed. Waiting for another caller's re-read and the read itself
        end by `deadline` (DeadlineExceeded when there is no value)."""
        wait_s = -1.0 if not deadline.bounded else deadline.budget()  # -1: no limit
        if not self._reading.acquire(timeout=wait_s):
            value = self.last()
            if value is None:
                raise DeadlineExceeded("no time left in the deadline to read the commit point")
            return value
        try:
            value = self.cached()
            if value is None:
                value = self._refresh(deadline)
            return value
        finally:
            self._reading.release()

    def _refresh(self, deadline: Deadline) -> int:
        try:
            value = self._read(deadline)
        except Exception:
            last = self.last()
            if last is None:
                raise
            return last
        with self._state:
            self._value, self._read_at = value, self._clock()
        return value

    def last(self) -> int | None:
        """The last value read, however old (None before the first read)."""
        with self._state:
            return self._value

    def cached(self) -> int | None:
        """The value without reading the manifest: None when a read is due
        (callers on an event loop then run `current` in a worker thread).
        Never waits for a read in progress."""
        with self._state:
            if self._value is None or self._clock() - self._read_at >= self._refresh_s:
                return None
            return self._value

    def advance(self, generation: int) -> None:
        """Called by an in-process Indexer right after it committed `generation`."""
        with self._state:
            self._value = max(self._value or 0, generation)
            self._read_at = self._clock()


@dataclass(frozen=True)
class ReleaseVerdict:
    """The latest release check recorded for this index."""

    generation: int
    passed: bool
    recorded_at: str

    def covers(self, generation: int) -> bool:
        """True when this record passed for exactly the generation being served."""
        return self.passed and self.generation == generation


def read_release(manifest: Manifest, deadline: Deadline) -> ReleaseVerdict | None:
    raw = manifest.get_meta(RELEASE_META, deadline)
    if not raw:
        return None
    fields = json.loads(raw)
    return ReleaseVerdict(
        generation=int(fields["generation"]),
        passed=bool(fields["passed"]),
        recorded_at=str(fields.get("recorded_at", "")),
    )


def write_release(
    manifest: Manifest, verdict: ReleaseVerdict, record_json: str, deadline: Deadline
) -> None:
    fields = {
        "generation": verdict.generation,
        "passed": verdict.passed,
        "recorded_at": verdict.recorded_at,
        "record": json.loads(record_json) if record_json else {},
    }
    manifest.set_meta(RELEASE_META, json.dumps(fields), deadline)
