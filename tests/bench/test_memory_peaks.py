"""The writer's memory split into its own heap and the store files it maps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.common.memory_peaks import MemoryPeaks, resident_mib

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
    with MemoryPeaks(interval_s=0.01) as peaks:
        before = peaks.take()["anon"]
        block = np.ones(64 * 2**20, dtype=np.uint8)  # 64 MiB, touched
        grown = peaks.take()["anon"]
        del block
    assert grown >= before + 60
