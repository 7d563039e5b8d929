"""The request's deadline reaches every store call of a Retrieve: the
commit-point read (`_visible`), the current-page count, the recency boost's
manifest read and the diversity step's vector read, each bounded by it (a
step with its own cap or margin hands on the sooner point), on real embedded
stores and a real SQLite manifest (unit)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded
from services.retriever.boosts import Boosts, RecencyBoost
from services.retriever.diversity import Diversity
from services.retriever.pipeline import RetrievalConfig, RetrievalPipeline, RetrievalRequest
from services.retriever.requests import DEFAULT_CONFIG
from services.retriever.steps import RetrievalSteps, build_retrieval_steps
from services.retriever.types import Intent
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from services.storage.manifest import ManifestEntry
from services.storage.storage import Storage
from services.storage.visibility import CommittedGeneration
from tests.storage.harness import make_chunk

pytestmark = pytest.mark.unit

DIM = 8
WATCHED = frozenset({"count", "vectors", "get_many", "get_meta", "search_plan"})


class DeadlineRecorder:
    """OBSERVER, not a fake: the real store (or manifest) does every call;
    the deadline each watched call was given is recorded on the way."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, Deadline | None]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in WATCHED:
            return attr

        def recorded(*args: Any, **kwargs: Any) -> Any:
            given = [a for a in (*args, *kwargs.values()) if isinstance(a, Deadline)]
            self.calls.append((name, given[0] if given else None))
            return attr(*args, **kwargs)

        return recorded

    def deadlines(self, name: str) -> list[Deadline | None]:
        return [deadline for called, deadline in self.calls if called == name]


class UnitEmbedder:
    """Stands in for the model: every text embeds to the same unit vector."""

    dim = DIM
    languages = frozenset({"*"})

    def embed_queries(
        self, texts: list[str], deadline: float | None = None, *, partition: str = ""
    ) -> np.ndarray:
        return np.tile(np.eye(DIM, dtype=np.float32)[0], (len(texts), 1))


@dataclass
class Index:
    vectors: DeadlineRecorder
    lexical: DeadlineRecorder
    manifest: DeadlineRecorder
    retrieve: Callable[[RetrievalRequest, Deadline], Any]
    steps: RetrievalSteps


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    vectors = DeadlineRecorder(EdgeVectorStore(tmp_path / "vectors", DIM))
    lexical = DeadlineRecorder(TantivyLexicalStore(tmp_path / "lexical"))
    manifest = DeadlineRecorder(SqliteManifest(tmp_path / "manifest.sqlite3"))
    chunks = [make_chunk(f"doc-{n}", text=f"rotation of signing keys, part {n}") for n in range(4)]
    rows = np.eye(DIM, dtype=np.float32)[[0, 0, 1, 2]] + 0.1
    vectors.upsert(chunks, rows.tolist(), deadline=unrequested_deadline())
    lexical.upsert(chunks, deadline=unrequested_deadline())
    entries = [_entry(chunk.doc_id, chunk.chunk_id) for chunk in chunks]
    manifest.commit_run(1, entries, [], unrequested_deadline())
    storage = Storage(vectors, lexical, manifest)  # type: ignore[arg-type]
    # refresh_s=0: every request re-reads the commit point (in a worker thread).
    committed = CommittedGeneration.of(manifest, refresh_s=0.0)  # type: ignore[arg-type]
    with ThreadPoolExecutor(2) as executor:
        steps = build_retrieval_steps(
            UnitEmbedder(),  # type: ignore[arg-type]
            storage,
            None,
            executor,
            RetrievalConfig(),
            committed=committed,
        )
        pipeline = RetrievalPipeline(steps)

        def retrieve(request: RetrievalRequest, deadline: Deadline) -> Any:
            return asyncio.run(pipeline.retrieve(request, deadline))

        yield Index(vectors, lexical, manifest, retrieve, steps)
    storage.close()


def _entry(doc_id: str, chunk_id: str) -> ManifestEntry:
    return ManifestEntry(
        doc_id, "en", "site-a", "h", "m", (chunk_id,), ("c",), "2026-01-01T00:00:00Z"
    )


def within(deadline: Deadline | None, request: Deadline) -> Deadline:
    assert deadline is not None and deadline.at is not None, "a store call without a deadline"
    assert request.at is not None and deadline.at <= request.at
    return deadline


def test_boosts_diversity_and_the_commit_point_read_within_the_request_deadline(
    index: Index,
) -> None:
    request_deadline = Deadline.after(10.0)
    request = RetrievalRequest(
        query="signing keys rotation",
        rerank=False,
        boosts=Boosts(recency=RecencyBoost(weight=1.0, scale_days=30)),
        diversity=Diversity(mmr_lambda=0.5),
    )
    result = index.retrieve(request, request_deadline)
    assert result.hits and not any("skipped" in note for note in result.notes), result.notes
    [committed] = index.manifest.deadlines("get_meta")
    assert within(committed, request_deadline) is request_deadline  # handed on as it came
    [boosts] = index.manifest.deadlines("get_many")
    [diversity] = index.vectors.deadlines("vectors")
    caps = (DEFAULT_CONFIG.boost_read_timeout_ms, DEFAULT_CONFIG.diversity_read_timeout_ms)
    for capped, cap_ms in zip((boosts, diversity), caps, strict=True):
        # each step's own cap (RAG_BOOST_READ_TIMEOUT_MS, RAG_DIVERSITY_READ_TIMEOUT_MS)
        assert within(capped, request_deadline).remaining_s() <= cap_ms / 1000


def test_the_page_check_counts_within_the_request_deadline_less_the_margin(
    index: Index,
) -> None:
    request_deadline = Deadline.after(10.0)
    request = RetrievalRequest(
        query="signing keys",
        rerank=False,
        intent=Intent.CURRENT_PAGE,
        page_url="https://example.test/not-indexed",
    )
    result = index.retrieve(request, request_deadline)
    assert result.page_indexed is False
    [count] = index.lexical.deadlines("count")
    margin_s = RetrievalConfig().safety_margin_ms / 1000
    assert request_deadline.at is not None
    assert within(count, request_deadline).at == pytest.approx(request_deadline.at - margin_s)


def test_the_channels_keep_back_the_margin_the_rerank_step_learnt(index: Index) -> None:
    """Under load the rest of a request takes longer; the channels, when the
    caller's deadline (not their own timeout) ends them, leave it that time
    too, or the answer would come after the deadline as DEADLINE_EXCEEDED."""
    floor_s = RetrievalConfig().safety_margin_ms / 1000
    request = RetrievalRequest(query="signing keys", rerank=False)
    first = Deadline.after(0.9)  # under the channel timeout (1 s)
    index.retrieve(request, first)
    index.steps.rerank.reserve.observe(0.1)  # a request needed 100 ms after reranking
    second = Deadline.after(0.9)
    index.retrieve(request, second)
    searched = index.lexical.deadlines("search_plan")
    assert len(searched) == 2 and first.at is not None and second.at is not None
    assert within(searched[0], first).at == pytest.approx(first.at - floor_s, abs=0.01)
    assert within(searched[1], second).at == pytest.approx(second.at - 0.15, abs=0.01)


def test_the_channels_keep_back_at_most_a_quarter_of_a_short_deadline(index: Index) -> None:
    """A caller that allows 60 ms: its channels get at least 45 of them, not
    10 (what the 50 ms floor would leave), so an idle machine answers it."""
    request = RetrievalRequest(query="signing keys", rerank=False)
    short = Deadline.after(0.06)
    index.retrieve(request, short)
    [searched] = index.lexical.deadlines("search_plan")
    assert short.at is not None
    kept_back = short.at - within(searched, short).at  # a quarter of what was left then
    assert 0 < kept_back <= 0.015 + 1e-6


def test_a_commit_point_read_with_no_time_left_keeps_the_last_value(index: Index) -> None:
    committed = CommittedGeneration.of(index.manifest, refresh_s=0.0)  # type: ignore[arg-type]
    with pytest.raises(DeadlineExceeded, match="no time left"):
        committed.current(Deadline.after(-0.001))  # nothing read yet: nothing to serve
    assert committed.current(Deadline.after(10.0)) == 1
    assert committed.current(Deadline.after(-0.001)) == 1  # hides newer rows, never shows any
    assert [d is not None for d in index.manifest.deadlines("get_meta")] == [True] * 3
