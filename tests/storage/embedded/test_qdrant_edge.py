"""Qdrant Edge specifics beyond the conformance suite: on-disk identity,
dimension checks, numpy input and concurrent use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe

from services.core.errors import ConfigError
from services.core.models import ScopeFilter, ScoredChunk
from services.storage.base import SearchEf, VectorQuantization, unrequested_deadline
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.point_ids import point_uuid
from tests.storage.harness import DIM, make_chunk, searches_meanwhile, seeded_vector

pytestmark = pytest.mark.integration


@pytest.fixture
def store(tmp_path: Path):
    store = EdgeVectorStore(tmp_path / "vectors", DIM)
    yield store
    store.close()


def test_point_ids_are_uuids_derived_from_chunk_ids(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path / "vectors", DIM)
    chunk = make_chunk("doc-1")
    store.upsert([chunk], [seeded_vector("a")], deadline=unrequested_deadline())
    store.close()
    shard = qe.EdgeShard.load(str(tmp_path / "vectors"))
    try:
        [record] = shard.retrieve(
            [point_uuid(chunk.chunk_id)], with_payload=True, with_vector=False
        )
        assert str(record.id) == point_uuid(chunk.chunk_id)
        assert record.payload is not None and record.payload["chunk_id"] == chunk.chunk_id
    finally:
        shard.close()


def test_reopening_with_another_dimension_is_refused(tmp_path: Path) -> None:
    EdgeVectorStore(tmp_path / "vectors", DIM).close()
    with pytest.raises(ConfigError, match="dim=4"):
        EdgeVectorStore(tmp_path / "vectors", 4)
    EdgeVectorStore(tmp_path / "vectors", DIM).close()  # the right size still opens


def test_a_shard_another_store_holds_is_not_blamed_on_its_shape(tmp_path: Path) -> None:
    """Two processes on one data directory: the second is told the shard is
    held, not that it needs a re-index."""
    holder = EdgeVectorStore(tmp_path / "vectors", DIM)
    try:
        with pytest.raises(ConfigError, match="Another process holds this shard") as refused:
            EdgeVectorStore(tmp_path / "vectors", DIM)
        assert "re-index" not in str(refused.value)
    finally:
        holder.close()


def test_non_positive_dimension_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        EdgeVectorStore(tmp_path / "vectors", 0)


def test_numpy_vectors_are_accepted(store: EdgeVectorStore) -> None:
    chunks = [make_chunk(f"doc-{n}") for n in range(3)]
    matrix = np.eye(3, DIM, dtype=np.float32)
    store.upsert(chunks, list(matrix), deadline=unrequested_deadline())
    hits = store.search(
        np.eye(1, DIM, 1, dtype=np.float32)[0], 1, ScopeFilter(), deadline=unrequested_deadline()
    )
    assert [hit.chunk.chunk_id for hit in hits] == [chunks[1].chunk_id]
    assert hits[0].score == pytest.approx(1.0)


def test_searches_run_while_a_writer_upserts(store: EdgeVectorStore) -> None:
    base = [make_chunk(f"doc-base-{n}") for n in range(50)]
    store.upsert(base, [seeded_vector(c.chunk_id) for c in base], deadline=unrequested_deadline())

    def search() -> list[ScoredChunk]:
        return store.search(seeded_vector("q"), 10, ScopeFilter(), deadline=unrequested_deadline())

    with searches_meanwhile(search, hits=10):
        for batch in range(20):
            chunks = [make_chunk(f"doc-w{batch}-{n}") for n in range(10)]
            store.upsert(
                chunks, [seeded_vector(c.chunk_id) for c in chunks], deadline=unrequested_deadline()
            )
    assert store.count(None, unrequested_deadline()) == 50 + 200


def test_optimize_keeps_results(store: EdgeVectorStore) -> None:
    chunks = [make_chunk(f"doc-{n}") for n in range(200)]
    store.upsert(
        chunks, [seeded_vector(c.chunk_id) for c in chunks], deadline=unrequested_deadline()
    )
    before = [
        h.chunk.chunk_id
        for h in store.search(seeded_vector("q"), 5, ScopeFilter(), deadline=unrequested_deadline())
    ]
    store.optimize()
    after = [
        h.chunk.chunk_id
        for h in store.search(seeded_vector("q"), 5, ScopeFilter(), deadline=unrequested_deadline())
    ]
    assert after == before


def clustered_unit_vectors(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Vectors in many small groups, like embeddings of related passages."""
    centres = rng.normal(size=(count // 8, dim))
    vectors = centres[rng.integers(0, len(centres), count)] + 0.3 * rng.normal(size=(count, dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("quantization", list(VectorQuantization))
def test_optimize_builds_an_index_that_finds_what_exact_search_finds(
    tmp_path: Path, quantization: VectorQuantization
) -> None:
    # Enough 384-d vectors for the engine to build HNSW (its threshold is ~7k),
    # and a scope matching 90% of them, so the filtered search walks the graph.
    # Share of the exact top 50 found here: ef 64 0.84, ef 100 0.945, ef 256 (default) 0.99.
    # int8, 100 queries: 0.995 rescoring twice the limit, 0.969 rescoring the limit alone.
    dim, count, limit = 384, 8000, 50
    rng = np.random.default_rng(7)
    vectors = clustered_unit_vectors(count, dim, rng)
    in_scope = np.arange(count) % 10 != 0
    chunks = [
        make_chunk(f"doc-{n}", scope_id="site-a" if in_scope[n] else "site-b") for n in range(count)
    ]
    store = EdgeVectorStore(tmp_path / "vectors", dim, quantization=quantization)
    for start in range(0, count, 1000):
        store.upsert(
            chunks[start : start + 1000],
            list(vectors[start : start + 1000]),
            deadline=unrequested_deadline(),
        )
    assert store.optimize()
    recalls = []
    for near in rng.integers(0, count, 20):  # queries near stored passages, as real ones are
        query = vectors[near] + 0.05 * rng.normal(size=dim).astype(np.float32)
        hits = store.search(
            query / np.linalg.norm(query),
            limit,
            ScopeFilter(scope_id="site-a"),
            deadline=unrequested_deadline(),
        )
        exact = np.argsort(-(vectors @ query) + 10 * ~in_scope)[:limit]
        expected = {chunks[row].chunk_id for row in exact}
        recalls.append(len(expected & {hit.chunk.chunk_id for hit in hits}) / limit)
    store.close()
    shard = qe.EdgeShard.load(str(tmp_path / "vectors"))
    assert shard.info().indexed_vectors_count == count
    shard.close()
    kind = "quantized" if quantization is VectorQuantization.INT8 else "unquantized"
    assert indexed_segments(tmp_path / "vectors") == {kind: 1}
    assert np.mean(recalls) >= 0.97


def test_an_index_built_unquantized_opens_quantized_and_ranks_by_the_original_vectors(
    tmp_path: Path,
) -> None:
    # An index from before RAG_VECTOR_QUANTIZATION (or with it at none) keeps
    # working under the default; when its next HNSW build is due (in the child
    # process, as the Indexer runs it), every indexed segment comes out quantized.
    dim, count = 384, 8000
    rng = np.random.default_rng(3)
    vectors = clustered_unit_vectors(2 * count, dim, rng)
    chunks = [make_chunk(f"doc-{n}") for n in range(2 * count)]
    old = EdgeVectorStore(tmp_path / "v", dim, quantization=VectorQuantization.NONE)
    old.upsert(chunks[:count], list(vectors[:count]), deadline=unrequested_deadline())
    assert old.optimize()
    old.close()
    assert indexed_segments(tmp_path / "v") == {"unquantized": 1}
    store = EdgeVectorStore(tmp_path / "v", dim)
    assert store.search(vectors[5], 1, ScopeFilter(), deadline=unrequested_deadline())
    store.upsert(chunks[count:], list(vectors[count:]), deadline=unrequested_deadline())
    assert store.optimize()
    assert indexed_segments(tmp_path / "v") == {"quantized": 1}
    for row in (5, 5000, 12000):
        exact = np.argsort(-(vectors @ vectors[row]))[:3]
        hits = store.search(vectors[row], 3, ScopeFilter(), deadline=unrequested_deadline())
        # the exact order, with the original vectors' scores (not the int8 copy's)
        assert [h.chunk.chunk_id for h in hits] == [chunks[r].chunk_id for r in exact]
        assert [h.score for h in hits] == pytest.approx(vectors[exact] @ vectors[row], abs=1e-5)
    store.close()


def indexed_segments(path: Path) -> dict[str, int]:
    """The shard's indexed segments (those whose vectors sit in a matrix file),
    counted by whether they also hold an int8 copy."""
    kinds: dict[str, int] = {}
    for storage in (path / "segments").glob("*/vector_storage"):
        if (storage / "matrix.dat").exists():
            kind = "quantized" if (storage / "quantized.data").exists() else "unquantized"
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def _payload_schema(path: Path) -> dict[str, Any]:
    """The payload indexes of a shard the store creates at `path`."""
    EdgeVectorStore(path, 4).close()
    shard = qe.EdgeShard.load(str(path))
    try:
        return dict(shard.info().payload_schema)
    finally:
        shard.close()


def test_filterable_hnsw_links_are_built_for_the_scope_only(tmp_path: Path) -> None:
    # The other filters select too few points to need a graph, or nearly all:
    # building links for them only slows the HNSW build (bench.scale).
    schema = _payload_schema(tmp_path / "shard")
    graphs = {field: info.params.enable_hnsw for field, info in schema.items()}
    assert graphs == {
        "scope_id": None,  # the engine's default: links built
        **dict.fromkeys(("doc_id", "url", "locale", "meta", "generation"), False),
    }
    assert schema["scope_id"].params.is_tenant is True


def test_payload_indexes_are_mapped_except_generation_and_locale_and_chunk_ids_not_indexed(
    tmp_path: Path,
) -> None:
    # chunk_id's index (one value per point, named by no filter) was ~23% of
    # the vector store's heap growth while writing; the others are mapped from their files once a
    # segment is optimised (bench/results/notes/payload_index_memory.md).
    schema = _payload_schema(tmp_path / "shard")
    assert "chunk_id" not in schema
    keywords = ("scope_id", "doc_id", "url", "meta")
    assert {field: schema[field].params.memory for field in keywords} == dict.fromkeys(
        keywords, qe.Memory.Cold
    )
    # Loaded: every search reads the generation, and a bilingual scope's every
    # search a locale holding most points (mapped, it was ~40% slower at 1M).
    assert schema["generation"].params.memory is None
    assert schema["locale"].params.memory is None


def test_a_search_asks_for_candidates_by_the_shard_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shard's point count sizes `hnsw_ef` (SearchEf). A spy, not a fake:
    it records the parameters the store builds and passes them on."""
    asked: list[int] = []
    search_params = qe.SearchParams

    def recorded(**kwargs: int) -> qe.SearchParams:
        asked.append(kwargs["hnsw_ef"])
        return search_params(**kwargs)

    search_ef = SearchEf(floor=16, growth=1.0, grows_above=2)
    store = EdgeVectorStore(tmp_path / "vectors", DIM, search_ef=search_ef)
    try:
        chunks = [make_chunk(f"doc-{i}") for i in range(6)]
        vectors = [seeded_vector(chunk.doc_id) for chunk in chunks]
        store.upsert(chunks, vectors, deadline=unrequested_deadline())
        monkeypatch.setattr(qe, "SearchParams", recorded)
        hits = store.search(vectors[3], 5, ScopeFilter(), unrequested_deadline())
        assert hits[0].chunk.doc_id == "doc-3"
        assert asked == [48]  # 16 x (6 points / 2) ** 1.0
    finally:
        store.close()
