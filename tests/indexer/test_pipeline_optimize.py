"""After every real indexing run the embedded vector store may build its
search index; a dry run never touches it, and a failure there does not fail
the run (the data is committed by then)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.errors import StoreError
from services.core.models import ContentType, Document
from services.embedding.embedder import Embedder
from services.indexer.app import build_indexing_pipeline
from services.indexer.pipeline import IndexingPipeline
from services.indexer.settings import IndexerSettings
from services.storage.base import unrequested_deadline
from services.storage.factory import open_manifest, open_stores
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage

pytestmark = pytest.mark.integration


class OptimizeSpy:
    """The real vector store, counting (or failing) its optimize() calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.failure: Exception | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def optimize(self) -> bool:
        self.calls += 1
        if self.failure is not None:
            raise self.failure
        return bool(self.inner.optimize())


@pytest.fixture
def spied(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[IndexingPipeline, OptimizeSpy]]:
    stores = StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED)
    vectors, lexical = open_stores(stores, embedder.dim)
    manifest = open_manifest(stores)
    spy = OptimizeSpy(vectors)
    pipeline = build_indexing_pipeline(IndexerSettings(), embedder, Storage(spy, lexical, manifest))  # type: ignore[arg-type]
    yield pipeline, spy
    vectors.close()
    lexical.close()
    manifest.close()


def doc(doc_id: str, text: str) -> Document:
    return Document(
        doc_id=doc_id,
        text=text,
        url=f"https://x.test/{doc_id}",
        title=doc_id,
        scope_id="site",
        content_type=ContentType.MARKDOWN,
    )


def test_real_runs_optimize_and_dry_runs_do_not(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    pipeline, spy = spied
    pipeline.upsert([doc("a", "# A\n\nAlpha body.")], dry_run=True)
    assert spy.calls == 0
    pipeline.upsert([doc("a", "# A\n\nAlpha body.")])
    assert spy.calls == 1
    pipeline.upsert([doc("a", "# A\n\nAlpha body.")])  # unchanged: an older index may be due
    assert spy.calls == 2


def test_a_failing_optimize_does_not_fail_the_run(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    pipeline, spy = spied
    spy.failure = StoreError("qdrant-edge: optimize: disk full")
    report = pipeline.upsert([doc("b", "# B\n\nBeta body.")])
    assert report.counts.added == 1 and spy.calls == 1
    assert pipeline.manifest.count(deadline=unrequested_deadline()) == 1
