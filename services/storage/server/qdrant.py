"""`VectorStore` on a Qdrant server or cluster (server mode), via qdrant-client.

Same payload layout and filter semantics as the embedded Qdrant Edge store
(`services.storage.payload`), so both pass one conformance suite. gRPC is
the default transport (`QDRANT_PREFER_GRPC`): smaller messages and no JSON
encoding of 384-float vectors on the hot path.

At start-up the collection is created when missing and refused when it
holds vectors of another size or distance (`qdrant_collection`).

Every call takes the caller's deadline (`base.call_budget_s`): the time left,
in whole seconds rounded up (qdrant-client's unit), is the call's timeout, so
the server stops the work too; writes are retried within it (qdrant-client
still waits for a write's answer up to QDRANT_TIMEOUT_S: a backstop only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

import grpc
import httpx
import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from services.core.deadline import Deadline
from services.core.errors import StoreError, StoreUnavailable
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.storage.base import (
    DEFAULT_VECTOR_QUANTIZATION,
    DEFAULT_VECTOR_SEARCH,
    SCAN_BATCH,
    IndexProgress,
    SearchEf,
    VectorQuantization,
    VectorQuery,
    call_budget_s,
    check_using,
    check_vector_counts,
    ranked,
    unrequested_deadline,
)
from services.storage.payload import (
    GENERATION_FIELD,
    METADATA_TERMS_FIELD,
    SEARCH_FIELDS,
    chunk_payload,
    metadata_term,
    payload_fields,
    stored_chunk_from_payload,
)
from services.storage.point_ids import point_uuid
from services.storage.server.calls import ServerCallPolicy, ServerPart, batched
from services.storage.server.qdrant_collection import ensure_collection, search_params
from services.storage.settings import StoreSettings

T = TypeVar("T")

_TRANSIENT_GRPC_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
}
_TRANSIENT_HTTP_STATUS = {429, 502, 503, 504}


def is_transient_qdrant_error(exc: BaseException) -> bool:
    """Errors worth retrying: the server was unreachable, overloaded or slow."""
    if isinstance(exc, grpc.RpcError):
        return exc.code() in _TRANSIENT_GRPC_CODES  # type: ignore[attr-defined]
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in _TRANSIENT_HTTP_STATUS
    return isinstance(exc, ResponseHandlingException | httpx.TransportError | TimeoutError)


def connect_qdrant(settings: StoreSettings, **client_options: Any) -> QdrantClient:
    """A client for `QDRANT_URL`. `client_options` go to `QdrantClient` as-is."""
    api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    return QdrantClient(
        url=settings.qdrant_url,
        api_key=api_key,
        prefer_grpc=settings.qdrant_prefer_grpc,
        grpc_port=settings.qdrant_grpc_port,
        timeout=math.ceil(settings.qdrant_timeout_s),
        **client_options,
    )


def scope_to_filter(scope: ScopeFilter | None) -> models.Filter | None:
    """All conditions must hold; doc_ids and urls match any of their values."""
    if scope is None or scope.is_empty():
        return None
    must: list[models.Condition] = []
    if scope.scope_id:
        must.append(_match("scope_id", scope.scope_id))
    if scope.scope_ids:
        must.append(_match_any("scope_id", scope.scope_ids))
    if scope.locale:
        must.append(_match("locale", scope.locale))
    if scope.doc_ids:
        must.append(_match_any("doc_id", scope.doc_ids))
    if scope.urls:
        must.append(_match_any("url", scope.urls))
    for key, value in scope.metadata:
        must.append(_match(METADATA_TERMS_FIELD, metadata_term(key, value)))
    must_not: list[models.Condition] = []
    if scope.visible_generation is not None:
        # must_not(> G): rows from before generations existed stay visible.
        later = models.Range(gt=scope.visible_generation)
        must_not.append(models.FieldCondition(key=GENERATION_FIELD, range=later))
    return models.Filter(must=must, must_not=must_not or None)


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _match_any(key: str, values: Sequence[str]) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))


class QdrantVectorStore(ServerPart[QdrantClient]):
    """Cosine kNN over chunk vectors in one Qdrant collection."""

    name = "qdrant"
    # No second (cross-lingual) vector on a Qdrant server yet: the factory
    # refuses RAG_CROSS_LINGUAL_MODEL in server mode at start-up.
    second_dim = 0

    def __init__(
        self,
        client: QdrantClient,
        collection: str,
        dim: int,
        timeout_s: float = 5.0,
        batch_size: int = 256,
        write_attempts: int = 4,
        shards: int = 1,
        replication_factor: int = 1,
        search_ef: SearchEf = DEFAULT_VECTOR_SEARCH,
        quantization: VectorQuantization = DEFAULT_VECTOR_QUANTIZATION,
    ) -> None:
        self.client = client
        # The floor only: the collection's size is a round trip away, and a
        # cluster's operator sizes `hnsw_ef` for it (RAG_VECTOR_SEARCH_EF).
        self.search_ef = search_ef
        self._closed = False
        self.collection = collection
        self.dim = dim
        self.batch_size = batch_size
        self.shards = shards
        self.replication_factor = replication_factor
        # qdrant-client takes whole seconds; round up so a 0.5 s budget is not "no timeout".
        self._timeout = max(1, math.ceil(timeout_s))
        self._calls = ServerCallPolicy("qdrant", is_transient_qdrant_error, write_attempts)
        ensure = partial(
            ensure_collection,
            client,
            collection,
            dim,
            shards=shards,
            replication_factor=replication_factor,
            timeout=self._timeout,
            quantization=quantization,
        )
        self._calls.write("ensure collection", ensure, unrequested_deadline())

    @classmethod
    def from_settings(cls, settings: StoreSettings, dim: int) -> QdrantVectorStore:
        return cls(
            connect_qdrant(settings),
            settings.qdrant_collection,
            dim,
            timeout_s=settings.qdrant_timeout_s,
            shards=settings.qdrant_shards,
            replication_factor=settings.qdrant_replication_factor,
            search_ef=settings.vector_search,
            quantization=settings.vector_quantization,
        )

    # -- writes ---------------------------------------------------------------

    def upsert(
        self,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
        deadline: Deadline,
        second_vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        check_vector_counts(self.name, self.second_dim, len(chunks), vectors, second_vectors)
        points = [self._point(chunk, vector) for chunk, vector in zip(chunks, vectors, strict=True)]
        for batch in batched(points, self.batch_size):
            self._write("upsert", self._live().upsert, deadline, points=batch, wait=True)

    def _point(self, chunk: Chunk, vector: Sequence[float]) -> models.PointStruct:
        values = np.asarray(vector, dtype=np.float32).tolist()
        if len(values) != self.dim:
            raise StoreError(
                f"vector of chunk {chunk.chunk_id} has {len(values)} dimensions, "
                f"collection {self.collection!r} expects {self.dim}"
            )
        return models.PointStruct(
            id=point_uuid(chunk.chunk_id), vector=values, payload=chunk_payload(chunk)
        )

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        """Rewrite payload fields of existing chunks; unknown ids are ignored
        (Qdrant rejects a whole batch that names a missing point)."""
        for batch in batched(list(updates), self.batch_size):
            existing = self._existing_ids([point_uuid(chunk_id) for chunk_id, _ in batch], deadline)
            # set_payload replaces the named top-level keys (metadata as a
            # whole) and keeps the vector, text and identity fields.
            operations: list[models.UpdateOperation] = [
                models.SetPayloadOperation(
                    set_payload=models.SetPayload(
                        payload=payload_fields(payload), points=[point_uuid(chunk_id)]
                    )
                )
                for chunk_id, payload in batch
                if point_uuid(chunk_id) in existing
            ]
            if operations:
                update = self._live().batch_update_points
                self._write(
                    "update payload", update, deadline, update_operations=operations, wait=True
                )

    def _existing_ids(
        self, point_ids: list[models.ExtendedPointId], deadline: Deadline
    ) -> set[str]:
        retrieve = self._live().retrieve
        records = self._write("check points", retrieve, deadline, ids=point_ids, with_payload=False)
        return {str(record.id) for record in records}

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        ids: list[models.ExtendedPointId] = [point_uuid(cid) for cid in chunk_ids]
        for batch in batched(ids, self.batch_size):
            selector = models.PointIdsList(points=batch)
            self._write(
                "delete", self._live().delete, deadline, points_selector=selector, wait=True
            )

    def _write(
        self, operation: str, method: Callable[..., T], deadline: Deadline, **request: Any
    ) -> T:
        """`method(collection, **request)`, retried on transient errors within
        `deadline`; each attempt's timeout is the time then left."""

        def attempt() -> T:
            timeout = self._call_timeout(deadline, f"the {operation}")
            return method(self.collection, timeout=timeout, **request)

        return self._calls.write(operation, attempt, deadline)

    # -- reads ----------------------------------------------------------------

    def search(
        self,
        vector: Sequence[float],
        limit: int,
        scope: ScopeFilter,
        deadline: Deadline,
    ) -> list[ScoredChunk]:
        if limit <= 0:
            return []
        query = partial(
            self._live().query_points,
            self.collection,
            query=np.asarray(vector, dtype=np.float32).tolist(),
            query_filter=scope_to_filter(scope),
            limit=limit,
            search_params=search_params(self.search_ef.candidates(limit)),
            with_payload=list(SEARCH_FIELDS),
            timeout=self._search_timeout(deadline),
        )
        return _hits(self._calls.read("search", query).points)

    def search_many(
        self, queries: Sequence[VectorQuery], deadline: Deadline
    ) -> list[list[ScoredChunk]]:
        timeout = self._search_timeout(deadline)
        wanted = [i for i, query in enumerate(queries) if query.limit > 0]
        results: list[list[ScoredChunk]] = [[] for _ in queries]
        if not wanted:
            return results
        batch = partial(
            self._live().query_batch_points,
            self.collection,
            requests=[self._request(queries[i]) for i in wanted],
            timeout=timeout,
        )
        for i, answer in zip(wanted, self._calls.read("search", batch), strict=True):
            results[i] = _hits(answer.points)
        return results

    def _request(self, query: VectorQuery) -> models.QueryRequest:
        check_using(self.name, self.second_dim, query.using)
        return models.QueryRequest(
            query=np.asarray(query.vector, dtype=np.float32).tolist(),
            filter=scope_to_filter(query.scope),
            limit=query.limit,
            params=search_params(self.search_ef.candidates(query.limit)),
            with_payload=list(SEARCH_FIELDS),
        )

    def _search_timeout(self, deadline: Deadline) -> int:
        return self._call_timeout(deadline, "a search")

    def _call_timeout(self, deadline: Deadline, what: str) -> int:
        # Whole seconds (qdrant-client), rounded up: 0.3 s left is 1 s, not none.
        return max(1, math.ceil(call_budget_s(self.name, deadline, self._timeout, what)))

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        ids: list[models.ExtendedPointId] = [point_uuid(cid) for cid in dict.fromkeys(chunk_ids)]
        records = self._retrieve("get", ids, deadline, "a search", with_payload=True)
        return [stored_chunk_from_payload(r.payload or {}) for r in records]

    def vectors(
        self, chunk_ids: Sequence[str], deadline: Deadline, using: str = ""
    ) -> dict[str, list[float]]:
        check_using(self.name, self.second_dim, using)
        by_point = {point_uuid(chunk_id): chunk_id for chunk_id in chunk_ids}
        found: dict[str, list[float]] = {}
        ids: list[models.ExtendedPointId] = list(by_point)
        options = {"with_payload": False, "with_vectors": True}
        for record in self._retrieve("vectors", ids, deadline, "a vectors read", **options):
            if isinstance(record.vector, list) and str(record.id) in by_point:
                found[by_point[str(record.id)]] = [float(v) for v in record.vector]  # type: ignore[arg-type]
        return found

    def _retrieve(
        self,
        action: str,
        ids: list[models.ExtendedPointId],
        deadline: Deadline,
        what: str,
        **options: bool,
    ) -> Iterator[models.Record]:
        """Points by id, a batch a call, each call within what `deadline`
        leaves (`what`: the call, for its budget's error)."""
        for batch in batched(ids, self.batch_size):
            retrieve = partial(
                self._live().retrieve,
                self.collection,
                ids=batch,
                timeout=self._call_timeout(deadline, what),
                **options,
            )
            yield from self._calls.read(action, retrieve)

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        """Every stored chunk, `batch` at a time (scroll pages, point-id order)."""
        offset: Any = None  # the client's next-page id, handed back as it came
        while True:
            scroll = partial(
                self._live().scroll,
                self.collection,
                limit=batch,
                offset=offset,
                with_payload=True,
                with_vectors=False,
                timeout=self._timeout,
            )
            records, offset = self._calls.read("scan", scroll)
            if records:
                yield [stored_chunk_from_payload(r.payload or {}) for r in records]
            if offset is None:
                return

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        count = partial(
            self._live().count,
            self.collection,
            count_filter=scope_to_filter(scope),
            exact=True,
            timeout=self._call_timeout(deadline, "a count"),
        )
        return int(self._calls.read("count", count).count)

    def ping(self) -> None:
        self._calls.read("ping", self._require_collection)

    def _require_collection(self) -> None:
        if not self._live().collection_exists(self.collection):
            raise StoreUnavailable(f"Qdrant collection {self.collection!r} does not exist")

    def index_progress(self) -> IndexProgress | None:
        """None: the server's collection info reports it (`indexed_vectors_count`)."""
        return None

    def optimize(self, *, settle: bool = True) -> bool:
        """Nothing to do: a Qdrant server runs its optimizers in the background."""
        return False


def _hits(points: Sequence[Any]) -> list[ScoredChunk]:
    """Scored points as hits, ties by chunk_id as in every store."""
    return ranked(
        [ScoredChunk(stored_chunk_from_payload(p.payload or {}), p.score) for p in points]
    )
