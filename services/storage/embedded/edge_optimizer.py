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
import errno
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from services.core.errors import StoreError

COPY_SUFFIX = ".optimizing"
OLD_SUFFIX = ".old"
CHANGED, UNCHANGED = "changed", "unchanged"
# The engine's thresholds, set in the shard's config (`qdrant_edge`) so that
# `OptimizeDue` and the engine judge by the same numbers: a segment whose
# unindexed vectors of one name hold this many KB gets an HNSW index; one with
# this many removed points may be vacuumed.
INDEXING_THRESHOLD_KB = 10_000
VACUUM_MIN_VECTORS = 1_000
# During a bulk load (`due(settle=False)`), a build waits until the points not
# yet indexed are this share of those indexed. Why: the engine merges the new
# points into the indexed segment (up to its segment size cap), so a build
# costs the whole index, or most of it
# (measured, bench.scale --optimize-each-run, default apart: at ~300k chunks
# each build took 21 s of a child process for ~6,200 new chunks, and the load
# slowed with every chunk: 4.5 min for the first 124k chunks, 8 for the next).
# Builds at a fixed share grow geometrically, so a load costs a few builds of
# the whole index, not one per threshold's worth of points. Meanwhile the
# newest points (at most this share) are searched exactly: correct, slower.
LOAD_BUILD_SHARE = 0.25


class ShardCounts(Protocol):
    """What `EdgeShard.info()` reports that the check reads."""

    @property
    def points_count(self) -> int: ...
    @property
    def indexed_vectors_count(self) -> int: ...


@dataclass
class OptimizeDue:
    """Whether the engine's optimizer would find work, read from the shard's
    counts, before paying for the copy the child works on.

    Why: the copy is the whole shard folder (3 GB at a million 384-d chunks)
    and the Indexer asks after every run, so a run that adds a few chunks
    would copy the index for a child to answer "unchanged". Due when: the
    first time since the store opened (what an earlier process removed is not
    known here); the unindexed points of the largest vector reach the
    indexing threshold (the engine counts each name's storage apart, and
    `indexed_vectors_count` counts every name's vectors); or the points
    removed since the last build (deletes, payload rewrites, which move a
    point out of an indexed segment, and overwriting upserts, counted by the
    store) could let the engine vacuum a segment. A check that says due when
    the engine then finds nothing costs one copy, as before."""

    largest_dim: int
    vector_names: int = 1
    removed: int = 0
    optimized_once: bool = False

    def points_removed(self, count: int) -> None:
        self.removed += max(count, 0)

    def due(self, counts: ShardCounts, *, settle: bool = True) -> bool:
        """`settle` False (a bulk load goes on): also wait until the points
        not yet indexed are LOAD_BUILD_SHARE of those indexed."""
        if not self.optimized_once or self.removed >= VACUUM_MIN_VECTORS:
            return True
        indexed_points = self.indexed_points(counts)
        unindexed = max(counts.points_count - indexed_points, 0)
        if not settle and unindexed < LOAD_BUILD_SHARE * indexed_points:
            return False
        return unindexed * self.largest_dim * 4 >= INDEXING_THRESHOLD_KB * 1000

    def indexed_points(self, counts: ShardCounts) -> int:
        """Points in an HNSW index (the engine counts each vector name's apart)."""
        return counts.indexed_vectors_count // max(self.vector_names, 1)

    def done(self) -> None:
        """An optimisation ran (changed or not): the counts start anew."""
        self.removed, self.optimized_once = 0, True


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
    """A copy of the (flushed) shard folder, next to it, holes kept
    (`copy_sparse`). A copy that fails (a full disk) is removed: left
    behind, it kept every later write out of space (probe)."""
    copy = sibling(path, COPY_SUFFIX)
    if copy.exists():
        shutil.rmtree(copy)
    try:
        shutil.copytree(path, copy, copy_function=copy_sparse)
    except BaseException:
        discard(copy)
        raise
    return copy


def copy_sparse(source: str, target: str) -> str:
    """Copy a file's data regions only, so a sparse file stays sparse: the
    engine's files are mostly holes (a shard of 14 MB on disk was 207 MB
    apparent, and a plain copy wrote all 207). Falls back to a plain copy
    where the file system cannot tell data from holes."""
    with open(source, "rb") as reader, open(target, "wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        try:
            _copy_data_regions(reader.fileno(), writer.fileno(), size)
        except OSError:
            reader.seek(0)
            writer.seek(0)
            writer.truncate(0)
            shutil.copyfileobj(reader, writer)
        writer.truncate(size)
    shutil.copystat(source, target)
    return target


def _copy_data_regions(reader: int, writer: int, size: int) -> None:
    offset = 0
    while offset < size:
        try:
            start = os.lseek(reader, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                return
            raise
        end = os.lseek(reader, start, os.SEEK_HOLE)
        os.lseek(reader, start, os.SEEK_SET)
        os.lseek(writer, start, os.SEEK_SET)
        left = end - start
        while left > 0:
            chunk = memoryview(os.read(reader, min(left, 1 << 20)))
            if not chunk:
                return
            left -= len(chunk)
            while chunk:
                chunk = chunk[os.write(writer, chunk) :]
        offset = end


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


def optimized_copy(path: Path) -> Path | None:
    """A copy of the (flushed) shard at `path`, optimised apart; None (and no
    copy left) when the engine found nothing to do."""
    copy = copy_for_optimizing(path)
    try:
        changed = optimize_copy(copy)
    except BaseException:
        discard(copy)
        raise
    if not changed:
        discard(copy)
        return None
    return copy


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
