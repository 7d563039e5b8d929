"""Prometheus metrics of the Indexer, in its app's own registry.

What runs did (documents by state, chunks embedded), what writing to the
stores cost (time per write batch, retries) and how big the index is (per
scope, pending records). The gRPC interceptor counts the calls themselves
(`grpc_server_*`).

Index sizes come from a collector that answers scrapes from a snapshot taken
at most every `size_refresh_s` in a thread of its own: counting a big index
costs a pass over the manifest and one filtered count per scope in each
store, which must not run on every scrape nor hold one up for long. Per-scope
series are capped at `max_scopes` (the largest by chunks); the remaining
scopes are summed under scope_id="_other", because a label value per tenant
would grow the scrape and the monitoring database without bound.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from services.core.logging import get_logger
from services.core.models import ScopeFilter
from services.indexer.planning import PlanCounts
from services.storage.base import VectorStore, unrequested_deadline
from services.storage.manifest import Manifest
from services.storage.storage import Part, Storage

log = get_logger(__name__)

OPERATIONS = ("upsert", "delete", "sync")
STATES = ("added", "updated", "unchanged", "deleted", "rejected")
STORES = tuple(part.value for part in Part)
OTHER_SCOPES = "_other"
# The planner's six states onto the metric's five: a metadata-only change
# rewrites the document's payloads, so it is an update as much as a new text.
_PLAN_FIELDS = {
    "added": ("added",),
    "updated": ("changed", "metadata_only"),
    "unchanged": ("unchanged",),
    "deleted": ("removed",),
    "rejected": ("rejected",),
}
# A local SQLite commit takes milliseconds; a bulk write to a busy
# OpenSearch, retries included, can take tens of seconds.
WRITE_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class IndexerMetrics:
    """The Indexer's metrics; the pipeline reports runs and writes to it."""

    def __init__(
        self,
        registry: CollectorRegistry,
        storage: Storage,
        *,
        size_refresh_s: float = 30.0,
        max_scopes: int = 100,
        pending_ttl_s: float = 5.0,
    ) -> None:
        self.documents = Counter(
            "rag_indexer_documents",
            "Documents per finished run (committed, or with nothing to commit), by operation "
            "and planned state; dry runs and runs that failed or were undone are not counted",
            ["operation", "state"],
            registry=registry,
        )
        self.chunks_embedded = Counter(
            "rag_indexer_chunks_embedded",
            "Chunks embedded by runs (unchanged chunks are never re-embedded)",
            registry=registry,
        )
        self.write_seconds = Histogram(
            "rag_indexer_store_write_duration_seconds",
            "Time of one write batch of a run to a store, its retries included",
            ["store"],
            buckets=WRITE_BUCKETS_S,
            registry=registry,
        )
        self.write_retries = Counter(
            "rag_indexer_store_write_retries",
            "Retries of store writes after transient errors (server stores only)",
            ["store"],
            registry=registry,
        )
        self._declare_series()
        self.pending = PendingRecordsCollector(storage.manifest, ttl_s=pending_ttl_s)
        self.unindexed = UnindexedVectorsCollector(storage.vectors, ttl_s=pending_ttl_s)
        self.index_sizes = IndexSizeCollector(
            StoreScopeCounts(storage),
            refresh_s=size_refresh_s,
            max_scopes=max_scopes,
        )
        registry.register(self.pending)
        registry.register(self.unindexed)
        registry.register(self.index_sizes)
        storage.observe_write_retries(lambda part: self.write_retries.labels(part.value).inc())

    def _declare_series(self) -> None:
        """Every series of a closed label set exists (at 0) from the start,
        so rate() and absence alerts never see a gap."""
        for operation in OPERATIONS:
            for state in STATES:
                self.documents.labels(operation, state)
        for store in STORES:
            self.write_seconds.labels(store)
            self.write_retries.labels(store)

    def record_run(self, operation: str, counts: PlanCounts) -> None:
        """A finished real run's documents by state."""
        for state, fields in _PLAN_FIELDS.items():
            value = sum(getattr(counts, f) for f in fields)
            if value:
                self.documents.labels(operation, state).inc(value)

    def add_embedded(self, chunks: int) -> None:
        self.chunks_embedded.inc(chunks)

    def time_write(self, store: str) -> AbstractContextManager[Any]:
        """Times the block as one write batch to `store`."""
        return self.write_seconds.labels(store).time()


class TtlGaugeCollector(Collector):
    """One gauge read at scrape time, the value reused for `ttl_s`; a read
    that fails or has nothing to say (None) leaves the series out, not the
    scrape."""

    NAME = ""
    HELP = ""

    def __init__(self, ttl_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self._clock = ttl_s, clock
        self._value: int | None = None
        self._taken_at = -math.inf
        self._lock = threading.Lock()

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.NAME, self.HELP)]

    def collect(self) -> Iterable[Metric]:
        value = self._current()
        return [] if value is None else [GaugeMetricFamily(self.NAME, self.HELP, value=value)]

    def read(self) -> int | None:
        raise NotImplementedError

    def _current(self) -> int | None:
        with self._lock:
            if self._clock() - self._taken_at >= self.ttl_s:
                try:
                    self._value = self.read()
                except Exception as exc:
                    log.warning("gauge_unavailable", metric=self.NAME, error=str(exc))
                    self._value = None
                self._taken_at = self._clock()
            return self._value


class PendingRecordsCollector(TtlGaugeCollector):
    """`rag_indexer_pending_records`: what index_stats.IndexStats.pending_documents
    reports. Reading the intents parses every saved row of a stuck run,
    hence the TTL."""

    NAME = "rag_indexer_pending_records"
    HELP = (
        "Manifest intent records of runs not yet settled: in flight, or interrupted and "
        "waiting for recovery (the Stats RPC's pending_documents)"
    )

    def __init__(
        self, manifest: Manifest, ttl_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(ttl_s, clock)
        self._manifest = manifest

    def read(self) -> int | None:
        return len(self._manifest.open_intents(unrequested_deadline()))


class UnindexedVectorsCollector(TtlGaugeCollector):
    """`rag_indexer_vectors_unindexed`: the vector store's points its HNSW
    index does not cover yet (VectorStore.index_progress), so an operator
    can see a bulk load's deferred build and its settle; absent where the
    store does not say (server stores, PostgreSQL)."""

    NAME = "rag_indexer_vectors_unindexed"
    HELP = (
        "Vector store points not yet in its search index, searched exactly until the next "
        "build: a bulk load defers builds and the idle settle makes them (embedded store)"
    )

    def __init__(
        self, vectors: VectorStore, ttl_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(ttl_s, clock)
        self._vectors = vectors

    def read(self) -> int | None:
        progress = self._vectors.index_progress()
        return None if progress is None else progress.unindexed


@dataclass(frozen=True)
class ScopeSize:
    documents: int = 0
    chunks: int = 0
    vectors: int = 0
    lexical_rows: int = 0


class ScopeCounts(Protocol):
    """Where index sizes come from (the stores; a fake in unit tests)."""

    def by_scope(self) -> dict[str, tuple[int, int]]:
        """(documents, chunks) per scope, as the manifest has them."""
        ...

    def vectors(self, scope_id: str | None) -> int:
        """Rows in the vector store, of one scope or (None) all."""
        ...

    def lexical_rows(self, scope_id: str | None) -> int: ...


class StoreScopeCounts:
    """`ScopeCounts` of the real stores."""

    def __init__(self, storage: Storage) -> None:
        self._vectors, self._lexical = storage.vectors, storage.lexical
        self._manifest = storage.manifest

    def by_scope(self) -> dict[str, tuple[int, int]]:
        # The Manifest interface has no per-scope aggregate (SQLite could
        # GROUP BY its indexed scope_id column, OpenSearch aggregate it):
        # one pass over the entries, which is why this runs only in a refresh.
        sizes: dict[str, tuple[int, int]] = {}
        for entry in self._manifest.entries():
            documents, chunks = sizes.get(entry.scope_id, (0, 0))
            sizes[entry.scope_id] = (documents + 1, chunks + len(entry.chunk_ids))
        return sizes

    def vectors(self, scope_id: str | None) -> int:
        return self._vectors.count(_scope_filter(scope_id), unrequested_deadline())

    def lexical_rows(self, scope_id: str | None) -> int:
        return self._lexical.count(_scope_filter(scope_id), unrequested_deadline())


def _scope_filter(scope_id: str | None) -> ScopeFilter | None:
    # Every generation, like the Stats RPC: rows of a run in flight count too.
    return None if scope_id is None else ScopeFilter(scope_id=scope_id)


def capped_scope_sizes(counts: ScopeCounts, max_scopes: int) -> dict[str, ScopeSize]:
    """Sizes of the `max_scopes` largest scopes (by chunks), the others summed
    under OTHER_SCOPES. The stores are counted per scope only for the scopes
    kept (a filtered count each); the rest is their total minus those."""
    manifest = counts.by_scope()
    ranked = sorted(manifest, key=lambda scope: (-manifest[scope][1], scope))
    kept, rest = ranked[:max_scopes], ranked[max_scopes:]
    sizes = {
        scope: ScopeSize(*manifest[scope], counts.vectors(scope), counts.lexical_rows(scope))
        for scope in kept
    }
    if rest:
        # Counts taken while a run writes may not add up: never below 0.
        sizes[OTHER_SCOPES] = ScopeSize(
            documents=sum(manifest[scope][0] for scope in rest),
            chunks=sum(manifest[scope][1] for scope in rest),
            vectors=max(0, counts.vectors(None) - sum(s.vectors for s in sizes.values())),
            lexical_rows=max(
                0, counts.lexical_rows(None) - sum(s.lexical_rows for s in sizes.values())
            ),
        )
    return sizes


def _in_daemon_thread(refresh: Callable[[], None]) -> None:
    threading.Thread(target=refresh, name="index-size-refresh", daemon=True).start()


_SIZE_GAUGES = (
    ("rag_index_documents", "documents", "Documents indexed per scope, from the manifest"),
    ("rag_index_chunks", "chunks", "Chunks of the indexed documents per scope, from the manifest"),
    ("rag_index_vectors", "vectors", "Rows in the vector store per scope"),
    ("rag_index_lexical_rows", "lexical_rows", "Rows in the lexical store per scope"),
)
_SIZE_NOTE = (
    f"; the largest scopes by chunks, the others summed as scope_id={OTHER_SCOPES}; "
    "refreshed in the background, at most every few tens of seconds"
)


class IndexSizeCollector(Collector):
    """`rag_index_*{scope_id}` from a snapshot at most `refresh_s` old.

    A scrape that finds the snapshot older starts a refresh in the
    background and waits for it at most `scrape_wait_s`; a slow count (a big
    index, a struggling store) leaves that scrape with the previous values.
    """

    def __init__(
        self,
        counts: ScopeCounts,
        *,
        refresh_s: float = 30.0,
        max_scopes: int = 100,
        scrape_wait_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        spawn: Callable[[Callable[[], None]], None] = _in_daemon_thread,
    ) -> None:
        self._counts, self.refresh_s, self.max_scopes = counts, refresh_s, max_scopes
        self.scrape_wait_s, self._clock, self._spawn = scrape_wait_s, clock, spawn
        self._snapshot: dict[str, ScopeSize] = {}
        self._taken_at = -math.inf
        self._running: threading.Event | None = None
        self._lock = threading.Lock()

    def describe(self) -> Iterable[Metric]:
        return list(_size_families({}))

    def collect(self) -> Iterable[Metric]:
        running = self._start_refresh_if_due()
        if running is not None:
            running.wait(self.scrape_wait_s)
        with self._lock:
            snapshot = self._snapshot
        return list(_size_families(snapshot))

    def _start_refresh_if_due(self) -> threading.Event | None:
        """The refresh in flight (one at most), or None when the snapshot is fresh."""
        with self._lock:
            if self._running is not None:
                return self._running
            if self._clock() - self._taken_at < self.refresh_s:
                return None
            self._running = running = threading.Event()
        self._spawn(self.refresh)
        return running

    def refresh(self) -> None:
        """Count now (called off the scrape, in its own thread)."""
        try:
            sizes: dict[str, ScopeSize] | None = capped_scope_sizes(self._counts, self.max_scopes)
        except Exception as exc:
            log.warning("index_size_refresh_failed", error=str(exc))
            sizes = None
        with self._lock:
            if sizes is not None:
                self._snapshot = sizes
            # A failure waits for the next interval too: a store in trouble
            # is not asked again at every scrape.
            self._taken_at = self._clock()
            running, self._running = self._running, None
        if running is not None:
            running.set()


def _size_families(sizes: dict[str, ScopeSize]) -> Iterator[GaugeMetricFamily]:
    for name, field, help_text in _SIZE_GAUGES:
        family = GaugeMetricFamily(name, help_text + _SIZE_NOTE, labels=["scope_id"])
        for scope, size in sorted(sizes.items()):
            family.add_metric([scope], getattr(size, field))
        yield family
