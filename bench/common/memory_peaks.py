"""A process's resident memory split the way the kernel accounts it, with
peaks per phase.

The kernel keeps only the total's high-water mark (VmHWM, ru_maxrss). For a
process that maps store files, most of that total can be file pages (a
segment's vectors read back while the HNSW graph is built): the kernel drops
those under pressure and reads them again, so they are not memory the process
needs in the way its own heap (anonymous pages) is. A sampler samples both
parts, so a phase's report says which one grew.

The sampler is a child process, not a thread: Qdrant Edge's optimize holds
the interpreter lock for its whole run (services/storage/embedded/
edge_optimizer.py), so a thread of the measured process would not run once
during an HNSW build and its peak would be the build's last moment only.
This file runs as that child, and imports nothing outside the standard
library for it.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import TextIO

STATUS = Path("/proc/self/status")
PARTS = ("RssAnon", "RssFile")


class SamplerGone(RuntimeError):
    """The sampling child exited before it was asked for a phase's peaks: the
    peaks of that phase are unknown (between-call samples would report only
    its last moment, the error this child exists to avoid)."""


def resident_mib(status: str) -> dict[str, int]:
    """`RssAnon` and `RssFile` in MiB, from the text of /proc/<pid>/status."""
    found = dict.fromkeys(PARTS, 0)
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in found:
            found[key] = int(value.split()[0]) // 1024
    return found


def _status_of_this_process(status: Path) -> Path:
    """The child reads the measured process's file, not its own `self`."""
    return Path(f"/proc/{os.getpid()}/status") if status == STATUS else status


class MemoryPeaks:
    """Samples this process every `interval_s` while open (from a child
    process); `take()` returns the peaks of each part since the last take (a
    phase's), and starts anew."""

    def __init__(self, interval_s: float = 0.2, status: Path = STATUS) -> None:
        self.interval_s, self.status = interval_s, status
        self._peaks = dict.fromkeys(PARTS, 0)
        self._lock = threading.Lock()
        self._sampler: subprocess.Popen[str] | None = None

    def __enter__(self) -> MemoryPeaks:
        self.sample()
        watched = _status_of_this_process(self.status)
        self._sampler = subprocess.Popen(
            [sys.executable, "-I", __file__, str(watched), str(self.interval_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            assert sampler.stdin is not None
            # End of input: the sampler exits (if it has already, a take() said so).
            with contextlib.suppress(BrokenPipeError):
                sampler.stdin.close()
            sampler.wait(timeout=10)
            if sampler.stdout is not None:
                sampler.stdout.close()

    @property
    def sampler_pid(self) -> int | None:
        """The sampling child's pid while open."""
        return None if self._sampler is None else self._sampler.pid

    def sample(self) -> None:
        self._merge(resident_mib(self.status.read_text()))

    def _merge(self, now: dict[str, int]) -> None:
        with self._lock:
            for part, mib in now.items():
                self._peaks[part] = max(self._peaks[part], mib)

    def _ask_sampler(self) -> None:
        sampler = self._sampler
        if sampler is None:
            return
        assert sampler.stdin is not None and sampler.stdout is not None
        try:
            sampler.stdin.write("take\n")
            sampler.stdin.flush()
            reply = sampler.stdout.readline()
        except BrokenPipeError:
            reply = ""
        if not reply:
            raise SamplerGone(
                f"the memory sampler (pid {sampler.pid}) exited with status"
                f" {sampler.wait(timeout=10)} before this phase's peaks were taken;"
                f" they are unknown (it reads {self.status})"
            )
        anon, file = reply.split()
        self._merge({"RssAnon": int(anon), "RssFile": int(file)})

    def take(self) -> dict[str, int]:
        """Peaks since the last take, in MiB: `anon` and `file`. Raises
        `SamplerGone` if the sampling child has exited (killed, say)."""
        self.sample()  # the phase's last moment, however short the phase
        self._ask_sampler()
        with self._lock:
            peaks, self._peaks = self._peaks, dict.fromkeys(PARTS, 0)
        return {"anon": peaks["RssAnon"], "file": peaks["RssFile"]}


def run_sampler(status: Path, interval_s: float, requests: TextIO, replies: TextIO) -> None:
    """Sample `status` every `interval_s`; answer each line of `requests` with
    the peaks since the last answer ("<anon MiB> <file MiB>"). Ends at the end
    of `requests` or when the process is gone."""
    peaks = dict.fromkeys(PARTS, 0)
    while True:
        asked, _, _ = select.select([requests], [], [], interval_s)
        try:
            now = resident_mib(status.read_text())
        except OSError:
            return  # the measured process has exited
        peaks = {part: max(peaks[part], now[part]) for part in PARTS}
        if asked:
            if not requests.readline():
                return
            replies.write(f"{peaks['RssAnon']} {peaks['RssFile']}\n")
            replies.flush()
            peaks = dict.fromkeys(PARTS, 0)


if __name__ == "__main__":
    run_sampler(Path(sys.argv[1]), float(sys.argv[2]), sys.stdin, sys.stdout)
