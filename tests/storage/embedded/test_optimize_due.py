"""An embedded vector store asks its engine for a build only when one can be
due (services.storage.embedded.edge_optimizer.OptimizeDue): the copy the
child works on is the whole shard, and the Indexer asks after every run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from services.storage.base import IndexProgress, unrequested_deadline
from services.storage.embedded import edge_optimizer as optimizer_module
from services.storage.embedded.edge_optimizer import (
    INDEXING_THRESHOLD_KB,
    LOAD_BUILD_SHARE,
    VACUUM_MIN_VECTORS,
    OptimizeDue,
)
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from tests.storage.embedded.test_qdrant_edge import clustered_unit_vectors
from tests.storage.harness import make_chunk

DIM = 384
# The indexing threshold in 384-d points as the check counts it (KB of 1,000
# bytes: 6,511), which is at or below the engine's (KB of 1,024 bytes: 6,667).
THRESHOLD_POINTS = -(-INDEXING_THRESHOLD_KB * 1000 // (DIM * 4))
# A batch the engine itself indexes.
BUILT_POINTS = 6_700

pytestmark = pytest.mark.long(seconds=8)


@dataclass
class Counts:
    points_count: int
    indexed_vectors_count: int


@pytest.mark.unit
def test_index_progress_counts_each_point_once_whatever_its_vectors() -> None:
    due = OptimizeDue(DIM, vector_names=2)
    assert due.indexed_points(Counts(10_000, 2 * 7_000)) == 7_000
    assert IndexProgress(10_000, 7_000).unindexed == 3_000
    assert IndexProgress(5, 7).unindexed == 0  # counts read apart may cross


@pytest.mark.unit
def test_the_first_ask_since_open_is_always_due() -> None:
    assert OptimizeDue(DIM).due(Counts(10, 10))


@pytest.mark.unit
def test_unindexed_points_below_the_threshold_are_not_due_and_at_it_are() -> None:
    due = OptimizeDue(DIM)
    due.done()
    assert not due.due(Counts(50_000 + THRESHOLD_POINTS - 1, 50_000))
    assert due.due(Counts(50_000 + THRESHOLD_POINTS, 50_000))


@pytest.mark.unit
def test_with_a_second_vector_each_point_counts_once_and_the_largest_dim_decides() -> None:
    due = OptimizeDue(largest_dim=DIM, vector_names=2)
    due.done()
    # 50,000 points indexed under both names: 100,000 indexed vectors.
    assert not due.due(Counts(50_000 + THRESHOLD_POINTS - 1, 100_000))
    assert due.due(Counts(50_000 + THRESHOLD_POINTS, 100_000))


@pytest.mark.unit
def test_removed_points_make_a_vacuum_possible_until_a_build_runs() -> None:
    due = OptimizeDue(DIM)
    due.done()
    due.points_removed(VACUUM_MIN_VECTORS - 1)
    assert not due.due(Counts(100, 100))
    due.points_removed(1)
    assert due.due(Counts(100, 100))
    due.done()
    assert not due.due(Counts(100, 100))


@pytest.mark.unit
def test_during_a_load_a_build_waits_for_a_share_of_the_index_and_a_settle_does_not() -> None:
    due = OptimizeDue(DIM)
    due.done()
    indexed = 400_000
    share = int(LOAD_BUILD_SHARE * indexed)  # 100,000: far above the threshold
    assert due.due(Counts(indexed + THRESHOLD_POINTS, indexed))  # settling: the threshold
    assert not due.due(Counts(indexed + share - 1, indexed), settle=False)
    assert due.due(Counts(indexed + share, indexed), settle=False)


@pytest.mark.unit
def test_during_a_load_a_small_index_still_builds_at_the_threshold() -> None:
    due = OptimizeDue(DIM)
    assert due.due(Counts(10, 0), settle=False)  # the first ask since open
    due.done()
    # 10,000 indexed: a quarter is below the threshold, which decides.
    assert not due.due(Counts(10_000 + THRESHOLD_POINTS - 1, 10_000), settle=False)
    assert due.due(Counts(10_000 + THRESHOLD_POINTS, 10_000), settle=False)


def _chunks(start: int, count: int) -> list:
    return [make_chunk(f"doc-{n}") for n in range(start, start + count)]


@pytest.mark.integration
def test_a_small_run_after_a_build_copies_nothing_and_a_large_one_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = _count_copies(monkeypatch)
    vectors = clustered_unit_vectors(2 * BUILT_POINTS + 100, DIM, np.random.default_rng(5))
    store = EdgeVectorStore(tmp_path / "vectors", DIM, optimize_apart=True)
    try:
        store.upsert(
            _chunks(0, BUILT_POINTS), list(vectors[:BUILT_POINTS]), deadline=unrequested_deadline()
        )
        assert store.optimize()  # the first ask: due, and the engine builds
        assert len(copies) == 1

        store.upsert(
            _chunks(BUILT_POINTS, 100),
            list(vectors[BUILT_POINTS:][:100]),
            deadline=unrequested_deadline(),
        )
        assert not store.optimize()  # 100 unindexed points: nothing to copy
        assert len(copies) == 1

        rest = slice(BUILT_POINTS + 100, 2 * BUILT_POINTS + 100)
        store.upsert(
            _chunks(rest.start, BUILT_POINTS), list(vectors[rest]), deadline=unrequested_deadline()
        )
        assert store.optimize()  # past the threshold: built again
        assert len(copies) == 2
        assert store.count(None, unrequested_deadline()) == 2 * BUILT_POINTS + 100
    finally:
        store.close()


@pytest.mark.integration
@pytest.mark.long(seconds=25)
def test_a_load_defers_the_build_and_the_settle_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = _count_copies(monkeypatch)
    indexed = 5 * BUILT_POINTS  # a quarter of it is above the threshold
    vectors = clustered_unit_vectors(indexed + BUILT_POINTS, DIM, np.random.default_rng(7))
    store = EdgeVectorStore(tmp_path / "vectors", DIM, optimize_apart=True)
    try:
        store.upsert(_chunks(0, indexed), list(vectors[:indexed]), deadline=unrequested_deadline())
        assert store.optimize(settle=False)  # the first ask since open: built
        store.upsert(
            _chunks(indexed, BUILT_POINTS), list(vectors[indexed:]), deadline=unrequested_deadline()
        )
        assert not store.optimize(settle=False)  # past the threshold, under a quarter: waits
        assert len(copies) == 1
        assert store.index_progress() == IndexProgress(indexed + BUILT_POINTS, indexed)
        # Meanwhile the new points are found (searched exactly).
        newest = store.search(list(vectors[-1]), 1, None, deadline=unrequested_deadline())
        assert newest[0].chunk.chunk_id == _chunks(indexed + BUILT_POINTS - 1, 1)[0].chunk_id
        assert store.optimize(settle=True)  # the load ended: built
        assert len(copies) == 2
        assert store.index_progress().unindexed == 0
        assert not store.optimize(settle=True)
    finally:
        store.close()


@pytest.mark.integration
def test_deletes_and_overwrites_count_towards_a_vacuum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = _count_copies(monkeypatch)
    store = EdgeVectorStore(tmp_path / "vectors", DIM, optimize_apart=True)
    vectors = clustered_unit_vectors(2000, DIM, np.random.default_rng(6))
    try:
        store.upsert(_chunks(0, 2000), list(vectors), deadline=unrequested_deadline())
        store.optimize()  # the first ask since open
        store.upsert(
            _chunks(0, 600), list(vectors[1000:1600]), deadline=unrequested_deadline()
        )  # 600 overwritten
        store.delete([c.chunk_id for c in _chunks(1000, 399)], deadline=unrequested_deadline())
        assert not store.optimize()
        assert len(copies) == 1  # 999 removed: below the engine's vacuum minimum
        store.delete([make_chunk("doc-1999").chunk_id], deadline=unrequested_deadline())
        store.optimize()
        assert len(copies) == 2
        assert store.count(None, unrequested_deadline()) == 1600
    finally:
        store.close()


def _count_copies(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The real copy, counted."""
    copies: list[Path] = []
    real_copy = optimizer_module.copy_for_optimizing

    def counted_copy(path: Path) -> Path:
        copies.append(path)
        return real_copy(path)

    monkeypatch.setattr(optimizer_module, "copy_for_optimizing", counted_copy)
    return copies
