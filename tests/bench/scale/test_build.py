"""The scale bench writes a committed, servable index and measures recall."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.scale.build import build_index, disk_bytes
from bench.scale.corpus import CorpusSpec, SyntheticCorpus
from bench.scale.load_probe import LoadProbe
from bench.scale.measure import hnsw_recall
from bench.scale.source import SourceCorpus
from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.embedded import qdrant_edge
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.factory import open_storage
from services.storage.settings import StoreMode, StoreSettings
from services.storage.visibility import committed_generation

pytestmark = pytest.mark.integration


def test_build_writes_a_committed_index_in_both_stores(
    small_source: SourceCorpus, tmp_path: Path
) -> None:
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=1500))
    report = build_index(corpus, tmp_path / "index", docs_per_run=100)
    assert report.chunks == 1500 and report.generation > 1
    assert report.seconds["vectors"] > 0 and report.seconds["lexical"] > 0
    assert sum(report.scopes.values()) == 1500
    storage = open_storage(
        StoreSettings(data_dir=tmp_path / "index", store_mode=StoreMode.EMBEDDED), 384
    )
    try:
        assert (
            storage.vectors.count(None, unrequested_deadline())
            == storage.lexical.count(None, unrequested_deadline())
            == 1500
        )
        assert storage.manifest.count(deadline=unrequested_deadline()) == report.documents
        assert committed_generation(storage.manifest, unrequested_deadline()) == report.generation
        visible = ScopeFilter(scope_id=corpus.filter_scope, visible_generation=report.generation)
        hits = storage.vectors.search(
            small_source.query_vectors[0], 5, visible, deadline=unrequested_deadline()
        )
        assert hits and all(h.chunk.scope_id == corpus.filter_scope for h in hits)
    finally:
        storage.close()
    sizes = disk_bytes(tmp_path / "index")
    assert sizes["vectors"] > 1500 * 384 * 4 and sizes["lexical"] > 0 and sizes["manifest"] > 0
    with pytest.raises(FileExistsError):
        build_index(corpus, tmp_path / "index")


def test_recall_of_exact_plain_segments_is_one(small_source: SourceCorpus, tmp_path: Path) -> None:
    # Below the HNSW threshold the engine searches exactly: recall must be 1.
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=800))
    report = build_index(corpus, tmp_path / "index")
    recall = hnsw_recall(
        tmp_path / "index" / "vectors",
        small_source.query_vectors,
        report.generation,
        corpus.filter_scope,
    )
    assert recall == {"none": 1.0, "1% scope": 1.0}


def _count_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    """A spy, not a fake: the real function runs; each call is counted."""
    real, calls = getattr(owner, name), []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_build_optimised_apart_writes_the_same_committed_index(
    small_source: SourceCorpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = _count_calls(monkeypatch, qdrant_edge, "optimized_copy")
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=1500))
    build_index(corpus, tmp_path / "inline", docs_per_run=500)
    assert not copies  # the bench's default builds in its own process
    report = build_index(corpus, tmp_path / "index", docs_per_run=500, optimize_apart=True)
    assert len(copies) == 1  # a shard copy, for a child process to optimise
    storage = open_storage(
        StoreSettings(data_dir=tmp_path / "index", store_mode=StoreMode.EMBEDDED), 384
    )
    try:
        assert storage.vectors.count(None, unrequested_deadline()) == 1500
        assert committed_generation(storage.manifest, unrequested_deadline()) == report.generation
    finally:
        storage.close()


@pytest.mark.parametrize("each_run", [False, True])
def test_the_optimizer_is_asked_after_every_run_only_when_told(
    small_source: SourceCorpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, each_run: bool
) -> None:
    asked = _count_calls(monkeypatch, EdgeVectorStore, "optimize")
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=1500))
    report = build_index(corpus, tmp_path / "index", docs_per_run=100, optimize_each_run=each_run)
    assert report.generation > 1
    # As the Indexer asks after every run; and once more after the last either way.
    assert len(asked) == (report.generation + 1 if each_run else 1)


def test_the_load_probe_times_searches_every_few_runs_and_after_the_settle(
    small_source: SourceCorpus, tmp_path: Path
) -> None:
    corpus = SyntheticCorpus(small_source, CorpusSpec(chunks=1500))
    probe = LoadProbe(small_source.query_vectors, corpus.filter_scope, every_runs=2)
    report = build_index(
        corpus, tmp_path / "index", docs_per_run=100, optimize_each_run=True, probe=probe
    )
    record = probe.record()
    assert record is not None and record["every_runs"] == 2
    *during, last = record["rows"]
    assert [row["generation"] for row in during] == list(range(2, report.generation + 1, 2))
    points = [row["points"] for row in during]
    assert points == sorted(points) and points[0] > 0
    # 1,500 points are under the engine's indexing threshold: all searched exactly.
    assert all(row["unindexed"] == row["points"] for row in record["rows"])
    assert last == {**last, "settled": True, "generation": report.generation, "points": 1500}
    assert all(min(row["search_p50_ms"].values()) > 0 for row in record["rows"])
    assert set(last["search_p50_ms"]) == {"none", "1% scope"}
    assert report.seconds["load probe"] > 0
