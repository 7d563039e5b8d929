"""The vector index is built apart (services.storage.embedded.edge_optimizer):
searches go on while it builds, the optimised copy is swapped in whole, an
interrupted swap is settled at the next open, and a failed build changes
nothing. Real Qdrant Edge shards and real child processes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import psutil
import pytest
import qdrant_edge as qe

from services.core.errors import StoreError
from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.embedded import edge_optimizer as optimizer_module
from services.storage.embedded.edge_optimizer import (
    COPY_SUFFIX,
    OLD_SUFFIX,
    exit_with_parent,
    optimize_copy,
)
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from tests.storage.embedded.test_qdrant_edge import clustered_unit_vectors
from tests.storage.harness import DIM, make_chunk, seeded_vector

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=11)]

# Enough 384-d vectors for the engine to build HNSW (its threshold is ~7k).
HNSW_DIM, HNSW_COUNT = 384, 7500


def _filled(path: Path, apart: bool) -> tuple[EdgeVectorStore, np.ndarray]:
    vectors = clustered_unit_vectors(HNSW_COUNT, HNSW_DIM, np.random.default_rng(3))
    store = EdgeVectorStore(path, HNSW_DIM, optimize_apart=apart)
    chunks = [make_chunk(f"doc-{n}") for n in range(HNSW_COUNT)]
    for start in range(0, HNSW_COUNT, 1000):
        store.upsert(
            chunks[start : start + 1000],
            list(vectors[start : start + 1000]),
            deadline=unrequested_deadline(),
        )
    return store, vectors


def _searches_during_optimize(store: EdgeVectorStore, query: list[float]) -> tuple[bool, int]:
    served, done = [0], threading.Event()

    def search() -> None:
        while not done.is_set():
            assert store.search(query, 5, ScopeFilter(), deadline=unrequested_deadline())
            served[0] += 1

    thread = threading.Thread(target=search)
    thread.start()
    try:
        changed = store.optimize()
    finally:
        done.set()
        thread.join()
    return changed, served[0]


def test_searches_go_on_while_the_index_is_built_apart(tmp_path: Path) -> None:
    apart, vectors = _filled(tmp_path / "apart", apart=True)
    inline, _ = _filled(tmp_path / "inline", apart=False)
    query = vectors[11].tolist()
    before = [
        h.chunk.chunk_id
        for h in apart.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
    ]
    changed_apart, served_apart = _searches_during_optimize(apart, query)
    changed_inline, served_inline = _searches_during_optimize(inline, query)
    assert changed_apart and changed_inline
    # In-process, the engine holds the GIL for the build: searches stop.
    assert served_apart > 10 * served_inline + 50
    assert [
        h.chunk.chunk_id
        for h in apart.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
    ] == before
    assert apart.optimize() is False  # nothing left to do
    for store in (apart, inline):
        store.close()
    shard = qe.EdgeShard.load(str(tmp_path / "apart"))
    assert shard.info().indexed_vectors_count == HNSW_COUNT  # the optimised copy is the shard
    shard.close()
    leftovers = {p.name for p in tmp_path.iterdir()}
    assert leftovers == {"apart", "inline"}


def test_an_interrupted_swap_is_settled_at_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "vectors"
    store = EdgeVectorStore(path, DIM)
    chunks = [make_chunk(f"doc-{n}") for n in range(20)]
    store.upsert(
        chunks, [seeded_vector(c.chunk_id) for c in chunks], deadline=unrequested_deadline()
    )
    store.close()
    # A crash between the two renames: the old shard moved aside, a copy half made.
    path.rename(path.with_name(path.name + OLD_SUFFIX))
    (path.with_name(path.name + COPY_SUFFIX)).mkdir()
    reopened = EdgeVectorStore(path, DIM)
    assert reopened.count(None, unrequested_deadline()) == 20
    reopened.close()
    assert {p.name for p in tmp_path.iterdir()} == {"vectors"}


def test_a_failed_build_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = EdgeVectorStore(tmp_path / "vectors", DIM)
    chunks = [make_chunk(f"doc-{n}") for n in range(20)]
    store.upsert(
        chunks, [seeded_vector(c.chunk_id) for c in chunks], deadline=unrequested_deadline()
    )

    def broken_child(copy: Path, timeout_s: float | None = None) -> bool:
        """Fault injection: the child process fails."""
        raise StoreError(f"optimizing {copy} failed (exit 1): injected")

    monkeypatch.setattr(optimizer_module, "optimize_copy", broken_child)
    with pytest.raises(StoreError, match="injected"):
        store.optimize()
    assert store.count(None, unrequested_deadline()) == 20
    assert store.search(seeded_vector("doc-3"), 1, ScopeFilter(), deadline=unrequested_deadline())
    assert {p.name for p in tmp_path.iterdir()} == {"vectors"}
    store.close()


def test_the_child_reports_a_shard_it_cannot_open(tmp_path: Path) -> None:
    (tmp_path / "not-a-shard").mkdir()
    with pytest.raises(StoreError, match="not-a-shard"):
        optimize_copy(tmp_path / "not-a-shard")


def test_a_copy_that_does_not_load_is_swapped_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors = _filled(tmp_path / "vectors", apart=True)
    query = vectors[5].tolist()
    before = [
        h.chunk.chunk_id
        for h in store.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
    ]
    # Fault injection: the swapped-in copy is loaded with a wrong dimension.
    params = qe.EdgeVectorParams(size=HNSW_DIM + 1, distance=qe.Distance.Cosine)
    monkeypatch.setattr(store, "_config", lambda: qe.EdgeConfig(vectors=params))
    with pytest.raises(StoreError):
        store.optimize()
    assert [
        h.chunk.chunk_id
        for h in store.search(query, 10, ScopeFilter(), deadline=unrequested_deadline())
    ] == before
    assert {p.name for p in tmp_path.iterdir()} == {"vectors"}
    monkeypatch.undo()
    store.close()
    reopened = EdgeVectorStore(tmp_path / "vectors", HNSW_DIM)
    assert reopened.count(None, unrequested_deadline()) == HNSW_COUNT
    reopened.close()


ORPHAN_PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", '''
import os, sys, time
from services.storage.embedded.edge_optimizer import exit_with_parent
exit_with_parent(os.getppid())
print("armed", flush=True)
time.sleep(120)
'''], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "armed"
print(child.pid, flush=True)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_an_optimizer_child_dies_with_its_parent() -> None:
    """A stack stopped mid-build leaves no build running on behind it."""
    parent = subprocess.run(
        [sys.executable, "-c", ORPHAN_PARENT], capture_output=True, text=True, timeout=60
    )
    assert parent.returncode == 0, parent.stderr
    child = psutil.Process(int(parent.stdout.strip()))
    # The parent has exited: the child gets SIGKILL (waited for, not timed).
    psutil.wait_procs([child], timeout=30)
    assert not child.is_running()


def test_an_optimizer_child_whose_parent_is_gone_does_not_start() -> None:
    with pytest.raises(SystemExit):
        exit_with_parent(os.getppid() + 1_000_000)


def test_a_sparse_file_is_copied_with_its_holes(tmp_path: Path) -> None:
    # Probe: a shard of 14 MB on disk was 207 MB apparent, and its plain copy
    # needed all 207 MB of free disk.
    source, target = tmp_path / "mmap.dat", tmp_path / "copy.dat"
    with open(source, "wb") as out:
        out.truncate(64 << 20)
        for offset in (0, 20 << 20, (64 << 20) - 5):
            out.seek(offset)
            out.write(b"data!")
    optimizer_module.copy_sparse(str(source), str(target))
    assert target.read_bytes() == source.read_bytes()
    assert target.stat().st_size == 64 << 20
    assert target.stat().st_blocks * 512 <= source.stat().st_blocks * 512 + (1 << 20)


def test_a_copy_that_fails_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Probe: a copy that hit a full disk was left behind and kept every later
    # write out of space. The fault (ENOSPC on the second file) is injected.
    shard = tmp_path / "vectors"
    shard.mkdir()
    for name in ("a.dat", "b.dat"):
        (shard / name).write_bytes(b"x" * 4096)
    copied: list[str] = []

    def fills_the_disk(source: str, target: str) -> str:
        if copied:
            raise OSError(errno.ENOSPC, "No space left on device")
        copied.append(source)
        return optimizer_module.copy_sparse(source, target)

    monkeypatch.setattr(optimizer_module, "copy_sparse", fills_the_disk)
    with pytest.raises(OSError, match="No space"):
        optimizer_module.copy_for_optimizing(shard)
    assert not optimizer_module.sibling(shard, optimizer_module.COPY_SUFFIX).exists()
    assert sorted(p.name for p in shard.iterdir()) == ["a.dat", "b.dat"]
