"""Optimising a Qdrant Edge shard in a child process, so queries never stall.

Why: `EdgeShard.optimize` (HNSW build, segment merges) holds the GIL for its
whole run. Measured here: a 20,000-vector build took 20.8 s, and a Python
thread ticking every millisecond did not run once meanwhile. In the embedded
stack the Retriever lives in the same process, so every Retrieve waited for
the build (p99 during an ingest 4× idle, issue 27).

How (`EdgeVectorStore.optimize`, under the store's write lock, so no write
lands meanwhile; searches go on against the live shard):
1. flush the live shard and copy its folder to `<path>.optimizing`;
2. `python -m services.storage.embedded.edge_optimizer <copy>` loads the copy,
   optimises it and says whether anything changed;
3. swap: `<path>` → `<path>.old`, the copy → `<path>`, load it, and hand it
   to new searches; the old shard is closed once no search runs on it any
   more, and `<path>.old` deleted. A copy that does not load is removed and
   `<path>.old` renamed back, so the live shard never changes on a failure.

Crash safety: `recover_swap` runs before every open. A crash between the two
renames leaves `<path>.old` and no `<path>`: the old shard is put back. Any
leftover copy is deleted; it was never served.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from services.core.errors import StoreError

COPY_SUFFIX = ".optimizing"
OLD_SUFFIX = ".old"
CHANGED, UNCHANGED = "changed", "unchanged"


def sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def recover_swap(path: Path) -> None:
    """Settle what an interrupted optimisation left (module docstring)."""
    old, copy = sibling(path, OLD_SUFFIX), sibling(path, COPY_SUFFIX)
    if not path.exists() and old.exists():
        old.rename(path)
    for leftover in (old, copy):
        if leftover.exists():
            shutil.rmtree(leftover)


def copy_for_optimizing(path: Path) -> Path:
    """A copy of the (flushed) shard folder, next to it."""
    copy = sibling(path, COPY_SUFFIX)
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(path, copy)
    return copy


def optimize_copy(copy: Path, timeout_s: float | None = None) -> bool:
    """Optimise the copy in a child process; True if anything changed."""
    command = [
        sys.executable,
        "-m",
        "services.storage.embedded.edge_optimizer",
        str(copy),
        str(os.getpid()),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise StoreError(f"optimizing {copy} took more than {timeout_s} s") from exc
    verdict = done.stdout.strip().splitlines()[-1:] if done.stdout else []
    if done.returncode != 0 or verdict not in ([CHANGED], [UNCHANGED]):
        raise StoreError(f"optimizing {copy} failed (exit {done.returncode}): {done.stderr[-500:]}")
    return verdict == [CHANGED]


def swap_in(path: Path, copy: Path) -> Path:
    """The optimised copy becomes the shard folder; the old one moves aside
    (returned) until the new one is known to load (`settle` / `swap_back`)."""
    old = sibling(path, OLD_SUFFIX)
    path.rename(old)
    copy.rename(path)
    return old


def settle(old: Path) -> None:
    """Delete the replaced folder (open mappings of its files stay valid)."""
    shutil.rmtree(old, ignore_errors=True)


def swap_back(path: Path, old: Path) -> None:
    """The copy did not load: the old folder becomes the shard again."""
    shutil.rmtree(path)
    old.rename(path)


def discard(copy: Path) -> None:
    shutil.rmtree(copy, ignore_errors=True)


def main(argv: list[str]) -> int:
    """The child: optimise the shard at argv[0], print changed/unchanged;
    argv[1], when given, is the parent's pid (`exit_with_parent`)."""
    if len(argv) > 1:
        exit_with_parent(int(argv[1]))
    import qdrant_edge as qe  # the child needs nothing else

    shard = qe.EdgeShard.load(argv[0])
    try:
        changed = shard.optimize()
        shard.flush()
    finally:
        shard.close()
    print(CHANGED if changed else UNCHANGED)
    return 0


def exit_with_parent(parent: int) -> None:
    """Be killed when the parent process dies (Linux), and leave at once if it
    already has: a stack stopped or killed mid-build would otherwise leave a
    build running on, whose result nobody swaps in (the copy is deleted at
    the next open), taking the cores from whatever runs next. Measured: a
    benchmark's idle phase ran beside such an orphan, its query p50 doubled."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        raise SystemExit(1)


_PR_SET_PDEATHSIG = 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
