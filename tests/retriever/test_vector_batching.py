"""`VectorSearchBatcher` over a real Qdrant Edge store: concurrent callers get
exactly what the store answers them alone; a batch runs to the latest of its
callers' deadlines."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.core.deadline import Deadline
from services.core.models import ScopeFilter
from services.retriever.vector_batching import VectorSearchBatcher, latest
from services.storage.base import VectorQuery, unrequested_deadline
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from tests.storage.harness import DIM, filter_corpus, seeded_vector

pytestmark = pytest.mark.integration


def test_concurrent_searches_get_what_the_store_answers_each_alone(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path / "vectors", DIM)
    try:
        chunks = filter_corpus()
        store.upsert(
            chunks, [seeded_vector(c.chunk_id) for c in chunks], deadline=unrequested_deadline()
        )
        batcher = VectorSearchBatcher(store, max_searches=8)
        scopes = [ScopeFilter(), ScopeFilter(scope_id="site-b"), ScopeFilter(locale="de")]
        queries = [
            [VectorQuery(seeded_vector(f"q{i}"), 3 + i % 4, scopes[i % 3])] for i in range(24)
        ]
        alone = [store.search_many(q, Deadline.after(30)) for q in queries]
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda q: batcher.search_many(q, Deadline.after(30)), queries))
        assert together == alone
        assert batcher.stats().items == 24
    finally:
        store.close()


def test_a_batch_ends_with_its_latest_deadline() -> None:
    soon, later = Deadline.after(1), Deadline.after(5)
    assert latest([soon, later]) is later
    assert not latest([soon, Deadline.never()]).bounded  # one that never ends
    assert not latest([]).bounded
