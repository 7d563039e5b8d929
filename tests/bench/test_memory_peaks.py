"""The writer's memory split into its own heap and the store files it maps."""

from __future__ import annotations

import mmap
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench.common.memory_peaks import MemoryPeaks, SamplerGone, resident_mib

pytestmark = pytest.mark.unit

STATUS = "Name:\tpython\nVmHWM:\t 900000 kB\nRssAnon:\t  524288 kB\nRssFile:\t  2097152 kB\n"


def test_parts_read_from_proc_status_text() -> None:
    assert resident_mib(STATUS) == {"RssAnon": 512, "RssFile": 2048}


def test_a_phase_peak_is_the_largest_sample_and_the_next_phase_starts_anew(
    tmp_path: Path,
) -> None:
    status = tmp_path / "status"
    status.write_text(STATUS)
    peaks = MemoryPeaks(interval_s=3600, status=status)  # samples only when asked
    peaks.sample()
    status.write_text(STATUS.replace("524288", "1048576"))
    peaks.sample()
    status.write_text(STATUS.replace("2097152", "1024"))
    assert peaks.take() == {"anon": 1024, "file": 2048}
    assert peaks.take() == {"anon": 512, "file": 1}


def test_this_process_heap_growth_is_seen_as_its_own_memory() -> None:
    # A fresh private anonymous mapping, not a numpy array: an allocator in a
    # long-lived test worker may hand back pages it already holds resident, and
    # then nothing grows (seen in CI). Its new pages, once touched, are always
    # this process's own (a shared mapping's would count as RssShmem instead).
    size = 64 * 2**20
    with MemoryPeaks(interval_s=0.01) as peaks:
        before = peaks.take()["anon"]
        block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        np.frombuffer(block, dtype=np.uint8)[:] = 1  # touch every page
        grown = peaks.take()["anon"]
        block.close()
    assert grown >= before + 60


def test_a_peak_while_this_process_holds_the_interpreter_lock_is_seen() -> None:
    # Qdrant Edge's HNSW build holds the interpreter lock for minutes; a sampler
    # thread of this process missed every peak inside it (only the build's
    # last moment was reported). Here a block lives and dies while no other
    # thread of this process can run: pure-Python work under a long switch
    # interval, and pages touched one by one from Python (nothing releases
    # the lock).
    size = 64 * 2**20
    with MemoryPeaks(interval_s=0.01) as peaks:
        before = peaks.take()["anon"]
        previous = sys.getswitchinterval()
        sys.setswitchinterval(100.0)
        try:
            block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            for offset in range(0, size, mmap.PAGESIZE):
                block[offset] = 1
            held_until = time.perf_counter() + 0.5
            while time.perf_counter() < held_until:
                pass
            block.close()
        finally:
            sys.setswitchinterval(previous)
        peak = peaks.take()
    assert peak["anon"] >= before + 60


def test_a_sampler_that_died_is_a_clear_error_not_a_peak_from_one_moment() -> None:
    with MemoryPeaks(interval_s=0.01) as peaks:
        peaks.take()
        pid = peaks.sampler_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SamplerGone, match=rf"sampler \(pid {pid}\) exited with status -9"):
            peaks.take()
    assert peaks.sampler_pid is None
