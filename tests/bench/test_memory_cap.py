"""A benchmark's work run inside a hard memory limit (a memory cgroup)."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common.memory_cap import (
    CapReport,
    ChildMemoryCap,
    MemoryCap,
    MemoryCapUnavailable,
    evict_from_page_cache,
    joining,
    memory_cgroup,
    resident_total_mib,
)

V1 = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
V2 = "0::/user.slice/session-1.scope\n"


@pytest.mark.unit
def test_the_v1_memory_hierarchy_is_used_when_mounted(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    layout = memory_cgroup(V1, root=tmp_path)
    assert (layout.directory, layout.version) == (tmp_path / "memory/process_api/abc", 1)
    assert layout.limit_file == "memory.limit_in_bytes"


@pytest.mark.unit
def test_the_unified_hierarchy_is_used_without_a_v1_memory_mount(tmp_path: Path) -> None:
    layout = memory_cgroup(V1 + V2, root=tmp_path)  # no tmp_path/memory: v1 not mounted
    assert (layout.directory, layout.version) == (tmp_path, 2)
    layout = memory_cgroup(V2, root=tmp_path)
    assert (layout.directory, layout.limit_file) == (
        tmp_path / "user.slice/session-1.scope",
        "memory.max",
    )


@pytest.mark.unit
def test_no_memory_cgroup_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryCapUnavailable, match="no memory cgroup"):
        memory_cgroup("4:cpu:/\n", root=tmp_path)


@pytest.mark.unit
def test_resident_memory_is_read_from_status_rounded_up(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmRSS:\t  1025 kB\nRssAnon:\t 900 kB\n")
    assert resident_total_mib(status) == 2
    assert CapReport(4096, 2, 4000, 12, 0).as_record() == {
        "limit_mib": 4096,
        "held_at_entry_mib": 2,
        "peak_mib": 4000,
        "limit_hits": 12,
        "oom_kills": 0,
    }


@pytest.mark.unit
def test_a_limit_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="limit_mib must be > 0"):
        MemoryCap(0)


# Every scenario under a limit runs in a fresh process of its own: whatever
# the kernel kills there, it is never a test worker.
SCENARIO_HEAD = (
    "import json, mmap, os, subprocess, sys\n"
    "from pathlib import Path\n"
    "from bench.common.memory_cap import MemoryCap, resident_total_mib\n"
    "held = resident_total_mib(Path(f'/proc/{os.getpid()}/status'))\n"
)


def _run_scenario(body: str, *args: str) -> dict:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO_HEAD + body, *args],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=120,
        check=False,
    )
    if "MemoryCapUnavailable" in done.stderr:
        pytest.skip(f"no writable memory cgroup here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# The allocating grandchild makes itself the OOM killer's first choice.
OWN_MEMORY = """
home = Path('/proc/self/cgroup').read_text()
allocate = "Path('/proc/self/oom_score_adj').write_text('1000'); b = bytearray(512 << 20)"
with MemoryCap(held + 256) as cap:
    inside = Path('/proc/self/cgroup').read_text()
    child = subprocess.run([sys.executable, '-c', 'from pathlib import Path; ' + allocate])
print(json.dumps({'rc': child.returncode, 'moved': inside != home,
                  'home': Path('/proc/self/cgroup').read_text() == home,
                  'pid': os.getpid(), **cap.report.as_record()}))
"""


@pytest.mark.integration
def test_own_memory_past_the_limit_is_killed_and_the_process_goes_home() -> None:
    seen = _run_scenario(OWN_MEMORY)
    assert seen["rc"] == -9 and seen["oom_kills"] >= 1
    assert seen["moved"] and seen["home"]
    layout = memory_cgroup(Path("/proc/self/cgroup").read_text())
    assert not list(layout.directory.glob(f"bench-cap-{seen['pid']}-*"))


MAPPED_FILE = """
mapped = Path(sys.argv[1])
with MemoryCap(held + 128) as cap, mapped.open('rb') as segment:
    pages = mmap.mmap(segment.fileno(), 0, access=mmap.ACCESS_READ)
    touched = sum(1 for offset in range(0, len(pages), mmap.PAGESIZE) if pages[offset] >= 0)
    pages.close()
print(json.dumps({'touched': touched, **cap.report.as_record()}))
"""


@pytest.mark.integration
def test_mapped_file_pages_are_dropped_at_the_limit_and_the_work_completes(
    tmp_path: Path,
) -> None:
    mapped = tmp_path / "segment"
    with mapped.open("wb") as out:
        for _ in range(384):
            out.write(os.urandom(1024 * 1024))
        out.flush()
        os.fsync(out.fileno())
        # Cached pages stay charged to whoever read or wrote them first: out of
        # the cache, they are charged to the cap when read inside it.
        os.posix_fadvise(out.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    seen = _run_scenario(MAPPED_FILE, str(mapped))
    assert seen["touched"] == 384 * 1024 * 1024 // mmap.PAGESIZE
    assert seen["limit_hits"] > 0 and seen["oom_kills"] == 0
    assert seen["peak_mib"] <= seen["limit_mib"]


CHILD_READS_MAPPED = """
import mmap, sys
from pathlib import Path
with open(sys.argv[1], 'rb') as segment:
    pages = mmap.mmap(segment.fileno(), 0, access=mmap.ACCESS_READ)
    touched = sum(1 for offset in range(0, len(pages), mmap.PAGESIZE) if pages[offset] >= 0)
print(touched, Path('/proc/self/cgroup').read_text().replace(chr(10), ' '))
"""


@pytest.mark.integration
def test_a_child_started_inside_is_charged_for_the_files_it_maps(tmp_path: Path) -> None:
    """A stack served under `--stack-memory-cap`: the child joins before it
    runs, the files it reads (evicted from the cache first) count against the
    limit, and at the limit the kernel drops them instead of killing it."""
    mapped = tmp_path / "index" / "segment"
    mapped.parent.mkdir()
    mapped.write_bytes(os.urandom(256 * 1024 * 1024))
    assert evict_from_page_cache(tmp_path / "index") == 256 * 1024 * 1024
    try:
        with ChildMemoryCap(96) as cap:
            argv = [sys.executable, "-c", CHILD_READS_MAPPED, str(mapped)]
            done = subprocess.run(
                joining(cap.procs, argv), capture_output=True, text=True, timeout=120, check=False
            )
            inside = cap.procs.parent.name
    except MemoryCapUnavailable as exc:
        pytest.skip(f"no writable memory cgroup here: {exc}")
    assert done.returncode == 0, done.stderr
    touched, cgroups = done.stdout.split(" ", 1)
    assert int(touched) == 256 * 1024 * 1024 // mmap.PAGESIZE
    assert inside in cgroups
    report = cap.report
    assert report is not None and report.held_at_entry_mib == 0
    assert report.limit_hits > 0 and report.oom_kills == 0
    assert 0 < report.peak_mib <= 96
