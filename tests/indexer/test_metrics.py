"""The Indexer's Prometheus metrics: scraped from the real embedded stack's
metrics listener after real upserts (real model, stores and gRPC), plus fast
checks of the index-size collector (capping, caching) and the retry hook on
fakes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.core.deadline import Deadline
from services.core.errors import StoreUnavailable
from services.core.models import ScopeFilter
from services.embedding.embedder import Embedder
from services.indexer.metrics import (
    OTHER_SCOPES,
    IndexerMetrics,
    IndexSizeCollector,
    PendingRecordsCollector,
    ScopeSize,
    UnindexedVectorsCollector,
    capped_scope_sizes,
)
from services.runtime.observability.telemetry import Telemetry
from services.storage.base import IndexProgress, unrequested_deadline
from services.storage.server.calls import ServerCallPolicy
from services.storage.storage import Storage
from tests.support.clock import ManualClock
from tests.support.corpus import corpus_documents
from tests.support.metrics import Scrape
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


def documents(samples: Scrape, state: str) -> float:
    return samples.value("rag_indexer_documents_total", operation="upsert", state=state)


def embedded(samples: Scrape) -> float:
    return samples.value("rag_indexer_chunks_embedded_total")


@pytest.fixture
def stack(tmp_path: Path, embedder: Embedder) -> Iterator[BackgroundStack]:
    telemetry = (Telemetry("indexer", metrics_port=0), Telemetry("retriever", metrics_port=0))
    stack = BackgroundStack(tmp_path, embedder, telemetry=telemetry).start()
    assert stack.stack is not None
    # Count at every scrape: the sizes are compared right after each run.
    stack.stack.indexer.metrics.index_sizes.refresh_s = 0.0
    stack.stack.indexer.metrics.unindexed.ttl_s = 0.0
    yield stack
    stack.stop()


def scrape(stack: BackgroundStack) -> Scrape:
    assert stack.stack is not None
    return Scrape.fetch(stack.stack.indexer.telemetry.metrics_url)


def two_scopes() -> list[ipb.Document]:
    """Seven corpus documents: four in scope alpha, three in beta."""
    docs = corpus_documents("alpha")[:7]
    for doc in docs[4:]:
        doc.scope_id = "beta"
    return docs


def test_runs_writes_and_sizes_are_exported(stack: BackgroundStack) -> None:
    docs = two_scopes()
    before = scrape(stack)
    for store in ("vector", "lexical", "manifest"):
        before.exact("rag_indexer_store_write_retries_total", store=store)  # KeyError: absent

    first = stack.upsert(docs)
    assert first.counts.added == len(docs)
    after_add = scrape(stack)
    assert documents(after_add, "added") - documents(before, "added") == len(docs)
    assert embedded(after_add) - embedded(before) == first.counts.chunks_to_embed > 0

    again = stack.upsert(docs)
    assert again.counts.unchanged == len(docs)
    after_same = scrape(stack)
    assert documents(after_same, "unchanged") - documents(after_add, "unchanged") == len(docs)
    assert embedded(after_same) == embedded(after_add)

    changed = ipb.Document()
    changed.CopyFrom(docs[0])
    changed.text = "# Rewritten\n\nA new body about lighthouse maintenance schedules.\n"
    outcome = stack.upsert([changed]).outcomes[0]
    assert outcome.state == ipb.DOCUMENT_STATE_CHANGED
    after_change = scrape(stack)
    assert documents(after_change, "updated") - documents(after_same, "updated") == 1
    assert embedded(after_change) - embedded(after_same) == outcome.chunks_embedded > 0

    for store in ("vector", "lexical", "manifest"):
        count = after_change.value("rag_indexer_store_write_duration_seconds_count", store=store)
        assert count > 0, store
    assert after_change.value("rag_indexer_pending_records") == 0
    handled = "grpc_server_handled_total"
    upserts_ok = {"grpc_method": "Upsert", "grpc_code": "OK"}
    assert after_change.value(handled, **upserts_ok) - before.value(handled, **upserts_ok) == 3
    check_sizes(stack, after_change)


def check_sizes(stack: BackgroundStack, samples: Scrape) -> None:
    """Per-scope gauges equal the stores' own counts; summed, the Stats RPC's."""
    parts = stack.runtime
    assert parts is not None
    stats = stack.indexer.Stats(ipb.StatsRequest(), timeout=30)
    totals = {"documents": 0.0, "chunks": 0.0, "vectors": 0.0, "lexical_rows": 0.0}
    for scope in ("alpha", "beta"):
        entries = [e for e in parts.storage.manifest.entries() if e.scope_id == scope]
        expected = {
            "documents": len(entries),
            "chunks": sum(len(e.chunk_ids) for e in entries),
            "vectors": parts.storage.vectors.count(
                ScopeFilter(scope_id=scope), deadline=unrequested_deadline()
            ),
            "lexical_rows": parts.storage.lexical.count(
                ScopeFilter(scope_id=scope), deadline=unrequested_deadline()
            ),
        }
        for field, count in expected.items():
            assert samples.value(f"rag_index_{field}", scope_id=scope) == count, (scope, field)
            totals[field] += count
    assert totals == {
        "documents": stats.documents,
        "chunks": stats.chunks,
        "vectors": stats.vectors,
        "lexical_rows": stats.lexical_rows,
    }
    assert stats.pending_documents == 0
    # A few documents are far below the engine's indexing threshold: every
    # point is searched exactly, none is in an HNSW index.
    assert samples.value("rag_indexer_vectors_unindexed") == stats.vectors > 0


class FakeScopeCounts:
    """Fake store counts (no stores): fixed sizes, and a count of how often
    the manifest was read, to see the collector's caching."""

    def __init__(self, sizes: dict[str, tuple[int, int, int, int]]) -> None:
        self.sizes = sizes
        self.reads = 0

    def by_scope(self) -> dict[str, tuple[int, int]]:
        self.reads += 1
        return {scope: (docs, chunks) for scope, (docs, chunks, _, _) in self.sizes.items()}

    def vectors(self, scope_id: str | None) -> int:
        return sum(s[2] for k, s in self.sizes.items() if scope_id in (None, k))

    def lexical_rows(self, scope_id: str | None) -> int:
        return sum(s[3] for k, s in self.sizes.items() if scope_id in (None, k))


FAKE_SIZES = {
    "big": (10, 100, 100, 100),
    "mid": (5, 50, 50, 49),
    "small": (2, 20, 20, 20),
    "tiny": (1, 3, 3, 3),
}


def test_scopes_beyond_the_cap_are_summed_as_other() -> None:
    sizes = capped_scope_sizes(FakeScopeCounts(FAKE_SIZES), max_scopes=2)
    assert sizes == {
        "big": ScopeSize(10, 100, 100, 100),
        "mid": ScopeSize(5, 50, 50, 49),
        OTHER_SCOPES: ScopeSize(3, 23, 23, 23),
    }
    assert OTHER_SCOPES not in capped_scope_sizes(FakeScopeCounts(FAKE_SIZES), max_scopes=4)


def gauge(collector: IndexSizeCollector, name: str) -> dict[str, float]:
    family = next(f for f in collector.collect() if f.name == name)
    return {s.labels["scope_id"]: s.value for s in family.samples}


def test_sizes_are_counted_at_most_once_per_interval() -> None:
    counts, clock = FakeScopeCounts(FAKE_SIZES), ManualClock(0.0)
    inline: Callable[[Callable[[], None]], None] = lambda refresh: refresh()  # noqa: E731
    collector = IndexSizeCollector(counts, refresh_s=30, max_scopes=3, clock=clock, spawn=inline)
    assert gauge(collector, "rag_index_chunks") == {"big": 100, "mid": 50, "small": 20, "_other": 3}
    clock.now = 29
    gauge(collector, "rag_index_vectors")
    assert counts.reads == 1
    clock.now = 30
    counts.sizes = {"big": (11, 110, 110, 110)}
    assert gauge(collector, "rag_index_documents") == {"big": 11}
    assert counts.reads == 2


def test_a_slow_refresh_leaves_the_scrape_with_the_last_snapshot() -> None:
    counts, clock = FakeScopeCounts(FAKE_SIZES), ManualClock(0.0)
    pending: list[Callable[[], None]] = []
    collector = IndexSizeCollector(
        counts, refresh_s=30, scrape_wait_s=0.0, clock=clock, spawn=pending.append
    )
    assert gauge(collector, "rag_index_documents") == {}  # first count still running
    assert len(pending) == 1
    gauge(collector, "rag_index_documents")
    assert len(pending) == 1  # one refresh at a time
    pending.pop()()
    assert gauge(collector, "rag_index_documents")["big"] == 10


def test_a_failing_count_keeps_the_last_snapshot() -> None:
    counts, clock = FakeScopeCounts(FAKE_SIZES), ManualClock(0.0)
    collector = IndexSizeCollector(counts, refresh_s=1, clock=clock, spawn=lambda f: f())
    assert gauge(collector, "rag_index_documents")["big"] == 10

    def broken() -> dict[str, tuple[int, int]]:
        raise StoreUnavailable("fake outage")

    counts.by_scope = broken  # type: ignore[method-assign]
    clock.now = 5
    assert gauge(collector, "rag_index_documents")["big"] == 10


class FakeManifest:
    """Fake manifest: only `open_intents`, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def open_intents(self, deadline: Deadline) -> list[object]:
        assert deadline.bounded  # the collector's reads carry a deadline too
        self.calls += 1
        return [object(), object()]


def test_pending_records_are_cached_for_the_ttl() -> None:
    manifest, clock = FakeManifest(), ManualClock(0.0)
    collector = PendingRecordsCollector(manifest, ttl_s=5, clock=clock)  # type: ignore[arg-type]
    assert [s.value for f in collector.collect() for s in f.samples] == [2]
    clock.now = 4
    list(collector.collect())
    assert manifest.calls == 1
    clock.now = 5
    list(collector.collect())
    assert manifest.calls == 2


class FakeVectorProgress:
    """Fake vector store (no engine): only `index_progress`, as given."""

    def __init__(self, progress: IndexProgress | Exception | None) -> None:
        self.progress = progress

    def index_progress(self) -> IndexProgress | None:
        if isinstance(self.progress, Exception):
            raise self.progress
        return self.progress


@pytest.mark.unit
@pytest.mark.parametrize(
    ("progress", "samples"),
    [
        (IndexProgress(points=10_000, indexed=7_500), [2_500]),
        (None, []),  # a store that keeps its index itself: no series
        (StoreUnavailable("vector store down"), []),  # a failed read: no series, a scrape
    ],
)
def test_unindexed_vectors_gauge_reads_the_store_s_index_progress(
    progress: IndexProgress | Exception | None, samples: list[int]
) -> None:
    store = FakeVectorProgress(progress)
    collector = UnindexedVectorsCollector(store, ttl_s=5, clock=ManualClock(0.0))  # type: ignore[arg-type]
    assert [s.value for f in collector.collect() for s in f.samples] == samples


class FakeServerStore:
    """Stands in for a server store adapter: only its retry policy, which
    treats every error as transient and does not wait between attempts."""

    def __init__(self) -> None:
        self.calls = ServerCallPolicy("fake", lambda exc: True, 3, backoff_initial_s=0.0)

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        self.calls.on_retry = on_retry
        return True


class FakeEmbeddedStore:
    """Stands in for an embedded store or the SQLite manifest: never retries."""

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        return False


def test_server_store_write_retries_are_counted() -> None:
    registry, vectors = CollectorRegistry(), FakeServerStore()
    storage: Any = Storage(vectors, FakeEmbeddedStore(), FakeEmbeddedStore())  # type: ignore[arg-type]
    IndexerMetrics(registry, storage)
    attempts = iter([ConnectionError("fake"), ConnectionError("fake"), None])

    def flaky() -> None:
        error = next(attempts)
        if error is not None:
            raise error

    vectors.calls.write("upsert", flaky, unrequested_deadline())
    for store, retries in (("vector", 2), ("lexical", 0), ("manifest", 0)):
        sample = registry.get_sample_value(
            "rag_indexer_store_write_retries_total", {"store": store}
        )
        assert sample == retries, store
