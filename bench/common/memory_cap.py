"""Run part of a benchmark inside a hard memory limit (a memory cgroup).

A process's peak RSS counts the store files it maps, pages the kernel keeps
while memory is free and drops (to read them again) when it is not. So a
writer's `ru_maxrss` on a 24 GiB machine does not say whether it would run on
a 4 GiB one. This does: the calling process moves into a child memory cgroup,
does its work, and moves back. The kernel then reclaims file pages at the
limit and kills the process if its own memory alone outgrows it, which is the
answer to the question.

Pages the process already holds stay charged where they were (kernels since
6.x no longer move charges with a process), so the cgroup's limit is
`limit_mib` less the process's resident memory on entry: those pages count in
full even if they are freed and reused inside, which can only overstate the
process's total, never understate it.

Linux only, with a writable memory cgroup (v1 `memory` controller or v2
`memory.max`): a root process on this machine. Anything else raises
`MemoryCapUnavailable` naming the path that could not be written.
"""

from __future__ import annotations

import os
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType

CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 1024 * 1024


class MemoryCapUnavailable(RuntimeError):
    """No memory cgroup this process can create and join."""


@dataclass(frozen=True)
class CapReport:
    """What the cgroup saw while the process was inside it."""

    limit_mib: int  # the whole process's: held on entry + the cgroup's limit
    held_at_entry_mib: int  # resident on entry, charged outside the cgroup
    peak_mib: int  # held on entry + the cgroup's high-water mark (own memory and page cache)
    limit_hits: int  # times an allocation met the limit and made the kernel reclaim
    oom_kills: int

    def as_record(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class CgroupLayout:
    """Where this process's memory cgroup lives and which files it has."""

    directory: Path
    version: int  # 1 or 2

    @property
    def limit_file(self) -> str:
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"


def memory_cgroup(proc_cgroup: str, root: Path = CGROUP_ROOT) -> CgroupLayout:
    """This process's memory cgroup, from the text of /proc/self/cgroup: the
    v1 `memory` hierarchy's line when it is mounted, else the v2 line."""
    lines = [line.split(":", 2) for line in proc_cgroup.splitlines() if line.count(":") >= 2]
    for _, controllers, path in lines:
        if "memory" in controllers.split(",") and (root / "memory").is_dir():
            return CgroupLayout(root / "memory" / path.lstrip("/"), 1)
    for hierarchy, controllers, path in lines:
        if hierarchy == "0" and not controllers:
            return CgroupLayout(root / path.lstrip("/"), 2)
    raise MemoryCapUnavailable("no memory cgroup in /proc/self/cgroup")


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise MemoryCapUnavailable(f"cannot write {value!r} to {path}: {exc}") from exc


def _read_int(path: Path) -> int:
    return int(path.read_text().split()[0])


def resident_total_mib(status: Path) -> int:
    """VmRSS of a /proc/<pid>/status file, in MiB (rounded up)."""
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return -(-int(line.split()[1]) // 1024)
    raise MemoryCapUnavailable(f"no VmRSS in {status}")


def _events(path: Path) -> dict[str, int]:
    """`key value` lines (memory.events, memory.oom_control) as a dict."""
    if not path.exists():
        return {}
    pairs = (line.split() for line in path.read_text().splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


class MemoryCap:
    """`with MemoryCap(4096) as cap:` runs the block with this process's
    memory limited to 4 GiB; `cap.report` says what the cgroup saw."""

    def __init__(self, limit_mib: int, proc_cgroup: Path = Path("/proc/self/cgroup")) -> None:
        self.limit_mib = _positive(limit_mib)
        self._proc_cgroup = proc_cgroup
        self._home: CgroupLayout | None = None
        self._cap: Path | None = None
        self._held_mib = 0
        self.report: CapReport | None = None

    def __enter__(self) -> MemoryCap:
        home = memory_cgroup(self._proc_cgroup.read_text())
        self._held_mib = resident_total_mib(Path(f"/proc/{os.getpid()}/status"))
        if self._held_mib >= self.limit_mib:
            raise ValueError(
                f"limit_mib {self.limit_mib} is not above the {self._held_mib} MiB"
                " this process already holds"
            )
        cap = _limited_cgroup(home, self.limit_mib - self._held_mib)
        try:
            _write(cap / "cgroup.procs", str(os.getpid()))
        except MemoryCapUnavailable:
            cap.rmdir()
            raise
        self._home, self._cap = home, cap
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self._home is not None and self._cap is not None
        self.report = read_report(self._home.version, self._cap, self.limit_mib, self._held_mib)
        _write(self._home.directory / "cgroup.procs", str(os.getpid()))
        _remove(self._cap)


def _positive(limit_mib: int) -> int:
    if limit_mib <= 0:
        raise ValueError(f"limit_mib must be > 0, got {limit_mib}")
    return limit_mib


def _limited_cgroup(home: CgroupLayout, limit_mib: int) -> Path:
    """A fresh child cgroup of `home`, named after this process, limited to
    `limit_mib`; removed again if the limit cannot be set."""
    cap = home.directory / f"bench-cap-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        cap.mkdir()
    except OSError as exc:
        raise MemoryCapUnavailable(f"cannot create {cap}: {exc}") from exc
    try:
        _write(cap / home.limit_file, str(limit_mib * MIB))
    except MemoryCapUnavailable:
        cap.rmdir()
        raise
    return cap


def _remove(cap: Path) -> None:
    try:
        cap.rmdir()
    except OSError as exc:
        # A process started inside still runs: the cgroup outlives the block,
        # and the block's own outcome matters more than its removal.
        print(f"memory cap: {cap} left in place: {exc}", file=sys.stderr)


def read_report(version: int, cap: Path, limit_mib: int, held_mib: int) -> CapReport:
    """What the cgroup `cap` saw; `held_mib` is added to its high-water mark."""
    if version == 1:
        oom = _events(cap / "memory.oom_control")
        return CapReport(
            limit_mib=limit_mib,
            held_at_entry_mib=held_mib,
            peak_mib=held_mib + _read_int(cap / "memory.max_usage_in_bytes") // MIB,
            limit_hits=_read_int(cap / "memory.failcnt"),
            oom_kills=oom.get("oom_kill", 0),
        )
    events = _events(cap / "memory.events")
    peak = cap / "memory.peak"
    return CapReport(
        limit_mib=limit_mib,
        held_at_entry_mib=held_mib,
        peak_mib=held_mib + _read_int(peak) // MIB if peak.exists() else -1,
        limit_hits=events.get("max", 0),
        oom_kills=events.get("oom_kill", 0),
    )


class ChildMemoryCap:
    """A memory cgroup limited to `limit_mib` for a process this one starts:
    the child joins it by writing its own pid to `procs` before it runs
    (`ServiceProcess(cgroup_procs=...)`), so every page it touches counts,
    none of this process's. `with ChildMemoryCap(4096) as cap:` start the
    child, stop it, and read `cap.report` after the block."""

    def __init__(self, limit_mib: int, proc_cgroup: Path = Path("/proc/self/cgroup")) -> None:
        self.limit_mib = _positive(limit_mib)
        self._proc_cgroup = proc_cgroup
        self._version = 0
        self._cap: Path | None = None
        self.report: CapReport | None = None

    @property
    def procs(self) -> Path:
        assert self._cap is not None, "enter the block first"
        return self._cap / "cgroup.procs"

    def __enter__(self) -> ChildMemoryCap:
        home = memory_cgroup(self._proc_cgroup.read_text())
        self._version, self._cap = home.version, _limited_cgroup(home, self.limit_mib)
        return self

    def __exit__(self, *_: object) -> None:
        assert self._cap is not None
        self.report = read_report(self._version, self._cap, self.limit_mib, 0)
        _remove(self._cap)


def joining(procs: Path, argv: list[str]) -> list[str]:
    """`argv` run by a shell that first joins the cgroup of `procs` (its
    `cgroup.procs`), then becomes the command: same pid, inside from the start."""
    return ["/bin/sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *argv]


def evict_from_page_cache(directory: Path) -> int:
    """Drop the cached pages of every file under `directory` (written back
    first), so that a process reading them next is charged for them: a page
    stays charged to the cgroup that first cached it. The bytes evicted."""
    evicted = 0
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        evicted += path.stat().st_size
    return evicted
