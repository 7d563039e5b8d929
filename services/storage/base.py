"""The store interfaces every implementation (embedded and server) satisfies.

Searches are the first phase of a two-phase fetch: a hit's row may be
`partial` (only `payload.SEARCH_FIELDS`: what fusion, the per-document cap,
boosts and the visibility rule need); `get` reads whole rows, once, for the
hits an answer keeps.

All methods are synchronous and may block; async callers run them in a worker
thread. Writes are idempotent upserts keyed by `chunk_id`, so re-running an
interrupted ingest converges. Implementations raise `StoreError` (or
`StoreUnavailable` for connection problems) from `services.core.errors`.

Deadlines: every read (searches, `get`, `vectors`, `count`) requires a
`deadline`, so none is issued without one: a request's, or for a read no
request makes `unrequested_deadline()`. Writes take an optional one (a run's;
an undo writes under the store's own timeout). Either is applied the same way
everywhere (`call_budget_s`): none left is `DeadlineExceeded` ("no time left")
before any work; a server store sends the time left as the call's timeout
(PostgreSQL: a transaction-local `statement_timeout`), and a retried write
never sleeps past it; an embedded store only checks before it starts. No
deadline (a write's): the store's own timeout alone. Audits (`scan`, `ping`,
`optimize`) run under the store's own timeout.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, StoreError
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk

# HNSW candidates per vector search. Qdrant's default (100) measured recall@100
# 0.96 against exact search on SciFact's 12.5k chunks; 256 gave 0.995, and
# 2 x limit keeps deep searches (the eval asks 300) as close.
DEFAULT_SEARCH_EF = 256


# Rows per page when an audit reads a whole store.
SCAN_BATCH = 1000


def call_budget_s(
    store: str, deadline: Deadline, cap_s: float = math.inf, what: str = "a call"
) -> float:
    """How long one store call (`what`: "a search", "an upsert", ...) may
    take: the store's own timeout `cap_s`, shortened to the caller's deadline.
    None left is `DeadlineExceeded` before any work, so a channel that already
    gave up, or a run past its deadline, never starts (or queues) a call.
    Server stores hand the result to the server as the call's timeout, which
    ends the work there too; embedded stores only check (a local call cannot
    be interrupted, and takes milliseconds)."""
    budget = deadline.budget(cap_s)
    if budget <= 0:
        raise DeadlineExceeded(f"{store}: no time left in the deadline for {what}")
    return budget


# Calls no request makes (start-up checks and recovery, a failed run's undo,
# Stats, audits and their repairs, background refreshes) still carry a
# deadline: a fresh one of this many seconds per call. It is the longest
# timeout a store may be configured with (RAG_*_TIMEOUT_S, at most 300 s), so
# the store's own timeout still decides how long such a call may take, as it
# did before deadlines were required.
UNREQUESTED_READ_S = 300.0


def unrequested_deadline() -> Deadline:
    """The deadline of one store call (a read or a write) that no request's
    deadline covers."""
    return Deadline.after(UNREQUESTED_READ_S)


def search_budget_s(store: str, deadline: Deadline, cap_s: float = math.inf) -> float:
    """`call_budget_s` for a search."""
    return call_budget_s(store, deadline, cap_s, "a search")


# HNSW's recall at a fixed `hnsw_ef` falls as its graph grows: with
# multilingual-e5-small's vectors, recall@10 against exact search at ef 256 was
# 0.996 at 10k points, 0.980 at 100k, 0.959 at 300k and 0.933 at 1M
# (bench/results/notes/scale_multilingual.md). So the candidates a search asks
# for grow with the points above EF_GROWS_ABOVE, as (points / EF_GROWS_ABOVE)
# ** growth; smaller indexes keep the configured floor.
EF_GROWS_ABOVE = 100_000
DEFAULT_EF_GROWTH = 0.6
MAX_SEARCH_EF = 4096


@dataclass(frozen=True)
class SearchEf:
    """How many HNSW candidates a vector search asks for (Qdrant's `hnsw_ef`,
    pgvector's `ef_search`): `floor` (RAG_VECTOR_SEARCH_EF) up to `grows_above`
    points, grown by `growth` (RAG_VECTOR_SEARCH_EF_GROWTH; 0: fixed) above,
    never under 2 x the search's limit, at most MAX_SEARCH_EF."""

    floor: int = DEFAULT_SEARCH_EF
    growth: float = DEFAULT_EF_GROWTH
    grows_above: int = EF_GROWS_ABOVE

    def candidates(self, limit: int, points: int = 0) -> int:
        """The ef of one search of `limit` hits over a store of `points`."""
        grown = self.floor * max(1.0, points / self.grows_above) ** self.growth
        return min(max(math.ceil(grown), 2 * limit), MAX_SEARCH_EF)


DEFAULT_VECTOR_SEARCH = SearchEf()


class VectorQuantization(StrEnum):
    """How a Qdrant store keeps the vectors its HNSW graph walks
    (RAG_VECTOR_QUANTIZATION). INT8: a scalar int8 copy of every indexed
    vector in memory, the float32 originals in mapped files read only to
    rescore a search's candidates. Measured at 200,000 multilingual-e5-small
    chunks (bench/results/notes/vector_quantization.md): search 1.8x faster at
    equal recall, the HNSW build 2x faster, ~120 MiB less resident memory.
    Searches always ask for rescoring, so a shard whose segments were built
    with either setting ranks by the original vectors."""

    NONE = "none"
    INT8 = "int8"


DEFAULT_VECTOR_QUANTIZATION = VectorQuantization.INT8
# A quantized search takes this many times its limit by the int8 scores and
# rescores them by the originals (services.storage.embedded.qdrant_edge).
RESCORE_OVERSAMPLING = 2.0


class PointCount:
    """A store's number of points, read again at most every `ttl_s`: a search
    sizes its candidates by it (`SearchEf`), and reading it on every search
    would cost more than the answer needs (Qdrant Edge: ~0.1 ms). A count that
    is a few seconds old moves the ef by a fraction of a percent."""

    def __init__(self, ttl_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s, self._clock = ttl_s, clock
        self._points, self._read_at = 0, -math.inf

    def get(self, read: Callable[[], int]) -> int:
        """The kept count, or `read()` once the kept one is older than the TTL."""
        now = self._clock()
        if now - self._read_at >= self._ttl_s:
            self._points, self._read_at = max(read(), 0), now
        return self._points


# The name of a chunk's second vector (the cross-lingual model's,
# RAG_CROSS_LINGUAL_MODEL): a Qdrant named vector, a second pgvector column.
# The first vector keeps the name "" (Qdrant's default vector).
SECOND_VECTOR = "cross_lingual"


@dataclass(frozen=True)
class VectorQuery:
    """One search of a `VectorStore.search_many` batch; `using`: which of a
    chunk's vectors ("" the first, SECOND_VECTOR the second)."""

    vector: Sequence[float]
    limit: int
    scope: ScopeFilter
    using: str = ""


def check_vector_counts(
    store: str,
    second_dim: int,
    count: int,
    vectors: Sequence[Sequence[float]],
    second: Sequence[Sequence[float]] | None,
) -> None:
    """An upsert's arguments: one vector per chunk (`count` chunks), and
    second vectors as `check_second_vectors` wants them."""
    if count != len(vectors):
        raise StoreError(f"{store}: {count} chunks but {len(vectors)} vectors")
    check_second_vectors(store, second_dim, count, second)


def check_second_vectors(
    store: str, second_dim: int, count: int, second: Sequence[Sequence[float]] | None
) -> None:
    """A store with a second vector gets one per chunk, one without none:
    never a chunk silently missing from the second channel."""
    if second_dim and (second is None or len(second) != count):
        got = "none" if second is None else str(len(second))
        raise StoreError(f"{store}: {count} chunks need {count} second vectors, got {got}")
    if not second_dim and second is not None:
        raise StoreError(f"{store}: opened without a second vector, but second vectors were given")


def check_using(store: str, second_dim: int, using: str) -> None:
    if using not in ("", SECOND_VECTOR) or (using == SECOND_VECTOR and not second_dim):
        raise StoreError(f"{store}: no vector named {using!r} in this store")


class SearchAsBatch(ABC):
    """`VectorStore.search` for a store whose one search path is
    `search_many` (Qdrant Edge, PostgreSQL): a batch of one."""

    @abstractmethod
    def search_many(
        self, queries: Sequence[VectorQuery], deadline: Deadline
    ) -> list[list[ScoredChunk]]: ...

    def search(
        self, vector: Sequence[float], limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        return self.search_many([VectorQuery(vector, limit, scope)], deadline)[0]


def ranked(hits: list[ScoredChunk]) -> list[ScoredChunk]:
    """Best first, equal scores by chunk_id (an engine's order among equal
    scores is not part of its contract)."""
    return sorted(hits, key=lambda hit: (-hit.score, hit.chunk.chunk_id))


@dataclass(frozen=True)
class IndexProgress:
    """A vector store's points, and those of them its search index covers
    (the rest are searched exactly until the next build)."""

    points: int
    indexed: int

    @property
    def unindexed(self) -> int:
        return max(self.points - self.indexed, 0)


@runtime_checkable
class VectorStore(Protocol):
    """Dense vectors with a compact payload (identity + filter/cite/debug fields).

    A store opened with `second_dim` > 0 gives every chunk a second vector
    (SECOND_VECTOR, of that many dimensions), written with the first by
    `upsert(..., second_vectors=...)` and searched by `VectorQuery.using`."""

    name: str
    second_dim: int  # 0: one vector per chunk

    def upsert(
        self,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
        deadline: Deadline,
        second_vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        """Insert or replace chunks with their vectors (same order, same
        length), within `deadline` (`call_budget_s`; every write alike).
        `second_vectors` is required exactly when the store has a second
        vector (`check_vector_counts`)."""
        ...

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        """Rewrite payload fields of existing chunks, keeping their vectors."""
        ...

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        """Remove chunks; ids that do not exist are ignored."""
        ...

    def search(
        self,
        vector: Sequence[float],
        limit: int,
        scope: ScopeFilter,
        deadline: Deadline,
    ) -> list[ScoredChunk]:
        """Nearest chunks by cosine similarity, best first, honoring `scope`;
        within `deadline` (`search_budget_s`: DeadlineExceeded past it).
        Rows are `partial` (SEARCH_FIELDS only)."""
        ...

    def search_many(
        self, queries: Sequence[VectorQuery], deadline: Deadline
    ) -> list[list[ScoredChunk]]:
        """`search` for each query, results in the same order, as one call
        where the engine has one (Qdrant Edge and a Qdrant server: one batch
        request; PostgreSQL: one connection and transaction)."""
        ...

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        """Whole chunks by id (missing ids are skipped), in no particular
        order, whatever their generation; within `deadline` as `search`."""
        ...

    def vectors(
        self, chunk_ids: Sequence[str], deadline: Deadline, using: str = ""
    ) -> dict[str, list[float]]:
        """The stored (unit-length) vectors of these chunks by id; missing ids
        are left out. For diversity (MMR) over the final candidates (the first
        vector), and for copying an index whole (`using` SECOND_VECTOR: the
        second), within `deadline` as `search`."""
        ...

    def index_progress(self) -> IndexProgress | None:
        """How much of the store its search index covers, for operators;
        None where the store keeps that itself (a Qdrant server's collection
        info) or indexes every write at once (pgvector's HNSW)."""
        ...

    def optimize(self, *, settle: bool = True) -> bool:
        """Do the index maintenance a server does in the background (build the
        search index, merge segments) if any is due; True if anything changed.
        `settle` False: more runs are likely to follow (a bulk load), so a
        store whose builds cost the whole index each time may wait until the
        part not yet indexed is large enough to be worth one; True: build
        whatever is due now (the load has ended)."""
        ...

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        """Every row, `batch` at a time, whatever its generation (audits)."""
        ...

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        """Rows inside `scope` (all when None), within `deadline` as `search`."""
        ...

    def ping(self) -> None:
        """Raise StoreUnavailable when the store cannot serve."""
        ...

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        """Call `on_retry` before every retried write; False when the store
        never retries (embedded stores write local files)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class LexicalStore(Protocol):
    """BM25 over title + heading_path + text, with keyword fields for filters."""

    name: str
    # The analysis the index was written with; queries use the same.
    analyzer: TextAnalyzer

    def upsert(self, chunks: Sequence[Chunk], deadline: Deadline) -> None:
        """Insert or replace chunks, within `deadline` as `VectorStore.upsert`."""
        ...

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        """Rewrite non-text fields of existing chunks (title/url/locale/metadata...)."""
        ...

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None: ...

    def search(
        self, query: str, limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        """BM25 search. `query` is raw user text: implementations must never let it
        become query syntax (operators, field prefixes, wildcards) or a parse error.
        Within `deadline`, as `VectorStore.search`. Rows may be `partial`; a
        hit's `exact` (the query identifiers it holds) is read from its text,
        so a store reads whole rows when the query has identifiers."""
        ...

    def search_plan(
        self, plan: QueryPlan, limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        """`search` with the query already analysed by this store's `analyzer`
        (`analyzer.plan(query)`): the same hits as `search(query, ...)`."""
        ...

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        """As `VectorStore.get`."""
        ...

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        """Every row, `batch` at a time, whatever its generation (audits)."""
        ...

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        """As `VectorStore.count`."""
        ...

    def describe_query(self, query: str) -> str:
        """The store's query for `query`, rendered for debug reports."""
        ...

    def ping(self) -> None: ...

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        """As `VectorStore.observe_write_retries`."""
        ...

    def close(self) -> None: ...
