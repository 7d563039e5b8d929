"""This process's resident memory split the way the kernel accounts it, with
peaks per phase.

The kernel keeps only the total's high-water mark (VmHWM, ru_maxrss). For a
process that maps store files, most of that total can be file pages (a
segment's vectors read back while the HNSW graph is built): the kernel drops
those under pressure and reads them again, so they are not memory the process
needs in the way its own heap (anonymous pages) is. A thread samples both
parts, so a phase's report says which one grew.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

STATUS = Path("/proc/self/status")
PARTS = ("RssAnon", "RssFile")


def resident_mib(status: str) -> dict[str, int]:
    """`RssAnon` and `RssFile` in MiB, from the text of /proc/<pid>/status."""
    found = dict.fromkeys(PARTS, 0)
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in found:
            found[key] = int(value.split()[0]) // 1024
    return found


class MemoryPeaks:
    """Samples this process every `interval_s` while open; `take()` returns
    the peaks of each part since the last take (a phase's), and starts anew."""

    def __init__(self, interval_s: float = 0.2, status: Path = STATUS) -> None:
        self.interval_s, self.status = interval_s, status
        self._peaks = dict.fromkeys(PARTS, 0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-peaks", daemon=True)

    def __enter__(self) -> MemoryPeaks:
        self.sample()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        now = resident_mib(self.status.read_text())
        with self._lock:
            for part, mib in now.items():
                self._peaks[part] = max(self._peaks[part], mib)

    def take(self) -> dict[str, int]:
        """Peaks since the last take, in MiB: `anon` and `file`."""
        self.sample()  # the phase's last moment, however short the phase
        with self._lock:
            peaks, self._peaks = self._peaks, dict.fromkeys(PARTS, 0)
        return {"anon": peaks["RssAnon"], "file": peaks["RssFile"]}
