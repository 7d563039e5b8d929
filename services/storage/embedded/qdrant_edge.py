"""`VectorStore` on Qdrant Edge: the Qdrant engine in-process, data in a folder.

Concurrency: `EdgeShard` is internally synchronised (searches release the GIL
and may run while an update is applied; measured: no errors with concurrent
readers and a writer), so searches take no lock. Writes go through one lock
because `update_payload` is read-then-write and the embedded mode promises a
single writer anyway.

Durability: the shard keeps a write-ahead log, so every applied update
survives a crash; `close()` flushes segments so the next open skips WAL replay.

Search index: Edge has no background optimizer, so vectors stay in a plain
(brute-force) segment until `optimize()` runs; the Indexer calls it after each
run, and the engine's own thresholds (~7k 384-d vectors and more) decide
whether an HNSW index is due, read from the shard's counts first
(`OptimizeDue`). The engine's optimizer holds the GIL throughout, so by
default it runs on a copy in a child process that is then swapped in
(`edge_optimizer`); readers count themselves in (`_reading`) so a replaced
shard is closed only once the last search on it has returned. Measured on
SciFact (12,508 chunks, 384-d, scope filter, 2 cores): exact search 1.3-1.8
ms p50; HNSW 0.4-0.6 ms at limit 50-100 with `hnsw_ef` 256, recall@100
against exact 0.995 (Qdrant's default `ef` of 100: recall@100 0.96, hence the
floor of `2 x limit` below).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import qdrant_edge as qe

from services.core.deadline import Deadline
from services.core.errors import ConfigError, StoreError, StoreUnavailable
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.storage.base import (
    DEFAULT_VECTOR_QUANTIZATION,
    DEFAULT_VECTOR_SEARCH,
    RESCORE_OVERSAMPLING,
    SCAN_BATCH,
    SECOND_VECTOR,
    IndexProgress,
    PointCount,
    SearchAsBatch,
    SearchEf,
    VectorQuantization,
    VectorQuery,
    call_budget_s,
    check_using,
    check_vector_counts,
    ranked,
    search_budget_s,
)
from services.storage.embedded.edge_filter import edge_filter, field_indexes
from services.storage.embedded.edge_optimizer import (
    INDEXING_THRESHOLD_KB,
    OptimizeDue,
    optimized_copy,
    recover_swap,
    settle,
    swap_back,
    swap_in,
)
from services.storage.guards import check_folder, store_errors, unavailable_on_failure
from services.storage.payload import (
    chunk_payload,
    payload_fields,
    stored_chunk_from_payload,
)
from services.storage.point_ids import point_uuid

_CONFIG_FILE = "edge_config.json"


def _as_floats(vector: Sequence[float]) -> list[float]:
    tolist = getattr(vector, "tolist", None)  # numpy arrays convert natively, much faster
    return tolist() if callable(tolist) else [float(x) for x in vector]


def _checked(chunk: Chunk, values: list[float], dim: int) -> list[float]:
    if len(values) != dim:
        raise StoreError(
            f"vector of chunk {chunk.chunk_id} has {len(values)} dimensions, store expects {dim}"
        )
    return values


class EdgeVectorStore(SearchAsBatch):
    """Cosine-similarity vector store in `path` (created on first use)."""

    def __init__(
        self,
        path: Path,
        dim: int,
        *,
        name: str = "qdrant-edge",
        search_ef: SearchEf = DEFAULT_VECTOR_SEARCH,
        optimize_apart: bool = True,
        second_dim: int = 0,
        quantization: VectorQuantization = DEFAULT_VECTOR_QUANTIZATION,
    ) -> None:
        """`optimize_apart`: optimise in a child process (False: in this
        process, which stalls every thread of it for the build's length).
        `second_dim`: each point also carries the named vector SECOND_VECTOR."""
        if dim <= 0 or second_dim < 0:
            raise ConfigError(f"vector dimensions must be positive, got {dim} and {second_dim}")
        self.name = name
        self.dim, self.second_dim = dim, second_dim
        self.search_ef = search_ef
        self.quantization = quantization
        self._points = PointCount()
        self._path = Path(path)
        self.optimize_apart = optimize_apart
        self._write_lock = threading.Lock()
        self._readers_changed = threading.Condition()
        self._readers: dict[int, int] = {}  # id(shard) -> searches running on it
        self._due = OptimizeDue(max(dim, second_dim), 2 if second_dim else 1)
        recover_swap(self._path)
        self._shard: qe.EdgeShard | None = self._open()

    def _config(self) -> qe.EdgeConfig:
        # Loading a shard with another quantization is allowed: the setting
        # applies to the segments its optimizer builds from then on.
        first = edge_vector_params(self.dim, self.quantization)
        optimizers = qe.EdgeOptimizersConfig(indexing_threshold=INDEXING_THRESHOLD_KB)
        if not self.second_dim:
            return qe.EdgeConfig(vectors=first, optimizers=optimizers)
        second = edge_vector_params(self.second_dim, self.quantization)
        return qe.EdgeConfig(vectors={"": first, SECOND_VECTOR: second}, optimizers=optimizers)

    def _open(self) -> qe.EdgeShard:
        config = self._config()
        if (self._path / _CONFIG_FILE).exists():
            try:
                return qe.EdgeShard.load(str(self._path), config)
            except Exception as exc:  # the library reports a size mismatch this way
                why = _open_failure(self._path, self.dim, self.second_dim, exc)
                raise ConfigError(why) from exc
        with store_errors(self.name, "create shard"):
            self._path.mkdir(parents=True, exist_ok=True)
            shard = qe.EdgeShard.create(str(self._path), config)
            for field, schema in field_indexes().items():
                shard.update(qe.UpdateOperation.create_field_index(field, schema))
        return shard

    def _live_shard(self) -> qe.EdgeShard:
        shard = self._shard
        if shard is None:
            raise StoreUnavailable(f"{self.name}: store is closed")
        return shard

    def upsert(
        self,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
        deadline: Deadline,
        second_vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        check_vector_counts(self.name, self.second_dim, len(chunks), vectors, second_vectors)
        if not chunks:
            return
        call_budget_s(self.name, deadline, what="an upsert")
        seconds = second_vectors if second_vectors is not None else [None] * len(chunks)
        points = [
            self._point(chunk, vector, second)
            for chunk, vector, second in zip(chunks, vectors, seconds, strict=True)
        ]
        with self._write_lock, store_errors(self.name, "upsert"):
            shard = self._live_shard()
            before = shard.info().points_count
            shard.update(qe.UpdateOperation.upsert_points(points))
            self._due.points_removed(len(points) - (shard.info().points_count - before))

    def _point(
        self, chunk: Chunk, vector: Sequence[float], second: Sequence[float] | None
    ) -> qe.Point:
        values = _checked(chunk, _as_floats(vector), self.dim)
        if second is None:
            return qe.Point(point_uuid(chunk.chunk_id), values, chunk_payload(chunk))
        named: qe.Vector = {
            "": values,
            SECOND_VECTOR: _checked(chunk, _as_floats(second), self.second_dim),
        }
        return qe.Point(point_uuid(chunk.chunk_id), named, chunk_payload(chunk))

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        """Rewrite payload fields of existing chunks; unknown ids are ignored
        (the library refuses to set payload on a missing point)."""
        if not updates:
            return
        call_budget_s(self.name, deadline, what="a payload update")
        with self._write_lock, store_errors(self.name, "update payload"):
            shard = self._live_shard()
            wanted: list[qe.PointId] = [point_uuid(chunk_id) for chunk_id, _ in updates]
            records = shard.retrieve(wanted, with_payload=False, with_vector=False)
            existing = {str(record.id) for record in records}
            for point_id, (_, payload) in zip(wanted, updates, strict=True):
                if point_id in existing:
                    operation = qe.UpdateOperation.set_payload([point_id], payload_fields(payload))
                    shard.update(operation)
            self._due.points_removed(len(existing))

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        if not chunk_ids:
            return
        call_budget_s(self.name, deadline, what="a delete")
        point_ids: list[qe.PointId] = [point_uuid(chunk_id) for chunk_id in chunk_ids]
        with self._write_lock, store_errors(self.name, "delete"):
            self._live_shard().update(qe.UpdateOperation.delete_points(point_ids))
            self._due.points_removed(len(point_ids))

    def search_many(
        self, queries: Sequence[VectorQuery], deadline: Deadline
    ) -> list[list[ScoredChunk]]:
        search_budget_s(self.name, deadline)
        wanted = [i for i, query in enumerate(queries) if query.limit > 0]
        results: list[list[ScoredChunk]] = [[] for _ in queries]
        if not wanted:
            return results
        with store_errors(self.name, "search"), self._reading() as shard:
            size = self._points.get(lambda: shard.info().points_count)
            batch = qe.QueryBatchRequest([self._request(queries[i], size) for i in wanted])
            answers = shard.query_batch(batch)  # one pass over the segments
        for i, points in zip(wanted, answers, strict=True):
            results[i] = ranked(
                [ScoredChunk(stored_chunk_from_payload(p.payload or {}), p.score) for p in points]
            )
        return results

    def _request(self, query: VectorQuery, size: int) -> qe.QueryRequest:
        check_using(self.name, self.second_dim, query.using)
        return qe.QueryRequest(
            limit=query.limit,
            query=qe.Query.Nearest(_as_floats(query.vector), using=query.using or None),
            filter=edge_filter(query.scope),
            # Whole rows: in process, reading SEARCH_FIELDS alone cost the same
            # (1.48 ms per 50-hit search on SciFact, measured both ways), and
            # a second phase would add a lookup per request.
            with_payload=True,
            params=search_params(self.search_ef.candidates(query.limit, size)),
        )

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        if not chunk_ids:
            return []
        search_budget_s(self.name, deadline)
        point_ids: list[qe.PointId] = [point_uuid(chunk_id) for chunk_id in set(chunk_ids)]
        with store_errors(self.name, "get"), self._reading() as shard:
            records = shard.retrieve(point_ids, with_payload=True, with_vector=False)
        return [stored_chunk_from_payload(record.payload or {}) for record in records]

    def vectors(
        self, chunk_ids: Sequence[str], deadline: Deadline, using: str = ""
    ) -> dict[str, list[float]]:
        check_using(self.name, self.second_dim, using)
        by_point = {point_uuid(chunk_id): chunk_id for chunk_id in chunk_ids}
        if not by_point:
            return {}
        call_budget_s(self.name, deadline, what="a vectors read")
        wanted: list[qe.PointId] = list(by_point)
        with store_errors(self.name, "vectors"), self._reading() as shard:
            records = shard.retrieve(wanted, with_payload=False, with_vector=[using])
        # The first vector comes back as a plain list, a named one as {name: list}.
        found = {by_point[str(r.id)]: r.vector for r in records if str(r.id) in by_point}
        return {
            chunk_id: list(vector[using] if isinstance(vector, dict) else vector)  # type: ignore[arg-type]
            for chunk_id, vector in found.items()
            if vector is not None
        }

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        """Every stored chunk, `batch` at a time, in point-id order."""
        offset: qe.PointId | None = None
        while True:
            request = qe.ScrollRequest(offset=offset, limit=batch, with_payload=True)
            with store_errors(self.name, "scan"), self._reading() as shard:
                records, offset = shard.scroll(request)
            if records:
                yield [stored_chunk_from_payload(record.payload or {}) for record in records]
            if offset is None:
                return

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        call_budget_s(self.name, deadline, what="a count")
        with store_errors(self.name, "count"), self._reading() as shard:
            return shard.count(qe.CountRequest(exact=True, filter=edge_filter(scope)))

    def index_progress(self) -> IndexProgress:
        """How many points the shard holds and how many of them an HNSW index
        covers; the rest are searched exactly (see `OptimizeDue`)."""
        with store_errors(self.name, "info"), self._reading() as shard:
            info = shard.info()
        return IndexProgress(info.points_count, self._due.indexed_points(info))

    def optimize(self, *, settle: bool = True) -> bool:
        """Run the engine's optimizers (HNSW index, segment merges, vacuum) as
        far as its thresholds call for; returns at once, False, when nothing is
        due (`settle` False: by the bulk-load rule of `OptimizeDue`). True if
        anything changed."""
        with self._write_lock, store_errors(self.name, "optimize"):
            shard = self._live_shard()
            if not self.optimize_apart:
                if not settle and not self._due.due(shard.info(), settle=False):
                    return False
                changed = bool(shard.optimize())
                self._due.done()
                return changed
            if not self._due.due(shard.info(), settle=settle):
                return False
            shard.flush()
            copy = optimized_copy(self._path)
            self._due.done()
            if copy is None:
                return False
            self._swap(shard, copy)
            return True

    def _swap(self, old: qe.EdgeShard, copy: Path) -> None:
        """The optimised copy replaces the live shard (caller holds the write
        lock); the old one is closed once no search runs on it."""
        old_folder = swap_in(self._path, copy)
        try:
            fresh = qe.EdgeShard.load(str(self._path), self._config())
        except BaseException:
            swap_back(self._path, old_folder)
            raise
        with self._readers_changed:
            self._shard = fresh
            self._readers_changed.wait_for(lambda: not self._readers.get(id(old)))
        old.close()
        settle(old_folder)

    @contextmanager
    def _reading(self) -> Iterator[qe.EdgeShard]:
        """The live shard, counted as in use until the block ends."""
        with self._readers_changed:
            shard = self._live_shard()
            self._readers[id(shard)] = self._readers.get(id(shard), 0) + 1
        try:
            yield shard
        finally:
            with self._readers_changed:
                left = self._readers[id(shard)] - 1
                if left:
                    self._readers[id(shard)] = left
                else:
                    del self._readers[id(shard)]
                self._readers_changed.notify_all()

    def ping(self) -> None:
        with unavailable_on_failure(self.name), self._reading() as shard:
            check_folder(self.name, self._path)
            shard.info()

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        return False  # local files: a failed write is an error, never retried

    def close(self) -> None:
        with self._write_lock:
            shard, self._shard = self._shard, None
            if shard is not None:
                with store_errors(self.name, "close"):
                    shard.flush()
                    shard.close()


def edge_vector_params(dim: int, quantization: VectorQuantization) -> qe.EdgeVectorParams:
    """One vector's parameters: cosine, and with INT8 the int8 copy the graph
    walks kept in memory and the originals in mapped files (`on_disk`)."""
    if quantization is VectorQuantization.NONE:
        return qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)
    int8 = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, always_ram=True)
    return qe.EdgeVectorParams(
        size=dim, distance=qe.Distance.Cosine, on_disk=True, quantization_config=int8
    )


def search_params(hnsw_ef: int) -> qe.SearchParams:
    """`hnsw_ef` HNSW candidates (plain segments ignore it: they search
    exactly); where a segment is quantized, twice the limit taken by the int8
    scores and rescored by the original vectors. Edge does not rescore unless
    asked: at 200,000 points recall@10 was 0.921 without it. Oversampling:
    with the limit alone rescored, the last places of a 50-hit list came from
    the int8 order (recall@50 0.969 against 0.993 unquantized, 8,000 clustered
    vectors; 0.995 at 1.5x and 2x)."""
    rescored = qe.QuantizationSearchParams(rescore=True, oversampling=RESCORE_OVERSAMPLING)
    return qe.SearchParams(hnsw_ef=hnsw_ef, quantization=rescored)


def _open_failure(path: Path, dim: int, second_dim: int, exc: Exception) -> str:
    """Why a shard would not open: another process holding its write-ahead log
    (the library says WouldBlock) is not a shape to re-index for."""
    second = f" and a second vector of {second_dim}" if second_dim else ""
    opening = f"cannot open vector shard {path} with dim={dim}{second}: {exc}"
    if "WouldBlock" in str(exc):
        return f"{opening}. Another process holds this shard: stop it, or use another data dir"
    return (
        f"{opening}. A shard built without the second vector (or with another one) needs a "
        "re-index into a fresh data directory"
    )
