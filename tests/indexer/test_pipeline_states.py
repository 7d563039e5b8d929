"""The five index states on the real embedded stores and the real model."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from services.core.models import ContentType, Document, ScopeFilter
from services.embedding.embedder import Embedder
from services.indexer import planning
from services.indexer.app import build_indexing_pipeline
from services.indexer.identity import content_hash
from services.indexer.pipeline import IndexingPipeline
from services.indexer.planning import DocState
from services.indexer.settings import IndexerSettings
from services.storage.base import unrequested_deadline
from services.storage.factory import open_manifest, open_stores
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage

pytestmark = pytest.mark.integration


class CountingEmbedder:
    """Spy around the real embedder: counts how many texts it was asked to
    embed (the metadata-only state must not embed anything)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name, self.dim, self.identity = inner.model_name, inner.dim, inner.identity
        self.document_encoder = inner.document_encoder
        self.texts = 0

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        self.texts += len(texts)
        return self.inner.embed_documents(texts, between)


@pytest.fixture
def pipeline(tmp_path: Path, embedder: Embedder) -> Iterator[IndexingPipeline]:
    stores = StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED)
    vectors, lexical = open_stores(stores, embedder.dim)
    manifest = open_manifest(stores)
    spy = CountingEmbedder(embedder)
    settings = IndexerSettings(
        chunk_target_chars=300, chunk_overlap_chars=50, chunk_max_slack_chars=100
    )
    yield build_indexing_pipeline(settings, spy, Storage(vectors, lexical, manifest))  # type: ignore[arg-type]
    vectors.close()
    lexical.close()
    manifest.close()


def doc(doc_id: str, text: str, **fields: object) -> Document:
    base = Document(
        doc_id=doc_id,
        text=text,
        url=f"https://x.test/{doc_id}",
        title=doc_id.title(),
        scope_id="site",
        content_type=ContentType.MARKDOWN,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


LONG = "\n\n".join(f"## Part {i}\n\n" + f"Sentence {i} about topic {i}. " * 12 for i in range(6))


def states(report) -> list[DocState]:  # type: ignore[no-untyped-def]
    return [p.state for p in report.plans]


def test_added_then_unchanged_writes_nothing(pipeline: IndexingPipeline) -> None:
    first = pipeline.upsert([doc("a", LONG), doc("b", "# B\n\nShort body.")])
    assert states(first) == [DocState.ADDED, DocState.ADDED]
    embedded = pipeline.embedder.texts  # type: ignore[attr-defined]
    assert embedded == first.counts.chunks_to_embed > 2
    second = pipeline.upsert([doc("a", LONG), doc("b", "# B\n\nShort body.")])
    assert states(second) == [DocState.UNCHANGED, DocState.UNCHANGED]
    assert pipeline.embedder.texts == embedded  # type: ignore[attr-defined]
    assert second.counts.vectors_to_upsert == second.counts.rows_to_delete == 0


def test_metadata_only_updates_payloads_without_embedding(pipeline: IndexingPipeline) -> None:
    pipeline.upsert([doc("a", LONG)])
    before = pipeline.embedder.texts  # type: ignore[attr-defined]
    report = pipeline.upsert([doc("a", LONG, title="Renamed", metadata={"team": "search"})])
    assert states(report) == [DocState.METADATA_ONLY]
    assert pipeline.embedder.texts == before  # type: ignore[attr-defined]
    assert report.counts.payload_updates == len(report.plans[0].payload_updates) > 1
    scope = ScopeFilter(metadata=(("team", "search"),))
    assert (
        pipeline.storage.vectors.count(scope, deadline=unrequested_deadline())
        == pipeline.storage.lexical.count(scope, deadline=unrequested_deadline())
        == report.counts.payload_updates
    )
    hits = pipeline.storage.lexical.search("topic", 50, scope, deadline=unrequested_deadline())
    assert hits and all(h.chunk.title == "Renamed" for h in hits)


def test_changed_reembeds_only_changed_chunks_and_deletes_vanished(
    pipeline: IndexingPipeline,
) -> None:
    first = pipeline.upsert([doc("a", LONG)])
    total = first.counts.chunks_to_embed
    edited = LONG.replace("Sentence 5 about topic 5.", "Completely new closing words.", 1)
    changed = pipeline.upsert([doc("a", edited)])
    assert states(changed) == [DocState.CHANGED]
    assert 0 < changed.counts.chunks_to_embed < total
    shorter = "\n\n".join(LONG.split("\n\n")[:4])
    shrunk = pipeline.upsert([doc("a", shorter)])
    plan = shrunk.plans[0]
    assert plan.state is DocState.CHANGED and plan.to_delete
    remaining = len(plan.chunks)
    assert (
        pipeline.storage.vectors.count(None, unrequested_deadline())
        == pipeline.storage.lexical.count(None, unrequested_deadline())
        == remaining
    )
    storage = pipeline.storage
    assert (
        storage.vectors.get(plan.to_delete, deadline=unrequested_deadline()) == []
        and storage.lexical.get(plan.to_delete, deadline=unrequested_deadline()) == []
    )


def test_removed_by_delete_and_by_sync(pipeline: IndexingPipeline) -> None:
    pipeline.upsert([doc("a", LONG), doc("b", "# B\n\nBody b."), doc("c", "# C\n\nBody c.")])
    deleted = pipeline.delete(["a"])
    assert states(deleted) == [DocState.REMOVED]
    synced = pipeline.sync("site", [doc("b", "# B\n\nBody b.")])
    assert sorted(states(synced)) == sorted([DocState.UNCHANGED, DocState.REMOVED])
    assert pipeline.manifest.count(deadline=unrequested_deadline()) == 1
    assert (
        pipeline.storage.vectors.count(None, unrequested_deadline())
        == pipeline.storage.lexical.count(None, unrequested_deadline())
        == 1
    )
    missing = pipeline.delete(["nope"])
    assert (
        missing.plans[0].state is DocState.REJECTED and missing.plans[0].error_code == "NOT_FOUND"
    )


def test_dry_run_plan_equals_the_real_run(pipeline: IndexingPipeline) -> None:
    pipeline.upsert([doc("keep", "# K\n\nSame."), doc("meta", LONG), doc("edit", LONG)])
    batch = [
        doc("keep", "# K\n\nSame."),
        doc("meta", LONG, title="New title"),
        doc("edit", LONG + "\n\nOne more paragraph."),
        doc("new", "# N\n\nNew doc."),
        doc("", "empty id"),
    ]
    storage = pipeline.storage
    before = (
        storage.vectors.count(None, unrequested_deadline()),
        storage.lexical.count(None, unrequested_deadline()),
        pipeline.embedder.texts,
    )  # type: ignore[attr-defined]
    plan = pipeline.upsert(batch, dry_run=True)
    after = (
        storage.vectors.count(None, unrequested_deadline()),
        storage.lexical.count(None, unrequested_deadline()),
        pipeline.embedder.texts,
    )  # type: ignore[attr-defined]
    assert after == before
    real = pipeline.upsert(batch)
    assert plan.counts == real.counts
    assert states(real) == [
        DocState.UNCHANGED,
        DocState.METADATA_ONLY,
        DocState.CHANGED,
        DocState.ADDED,
        DocState.REJECTED,
    ]


def test_bad_documents_are_rejected_alone(pipeline: IndexingPipeline) -> None:
    report = pipeline.upsert(
        [
            doc("", "body"),
            doc("x" * 600, "body"),
            doc("empty", "   "),
            doc("loc", "body", locale="english!"),
            doc("nul", "bad\x00byte"),
            doc("good", "# G\n\nFine."),
            doc("good", "# G\n\nDuplicate in the same batch."),
        ]
    )
    errors = [p.error for p in report.plans]
    assert states(report)[:5] == [DocState.REJECTED] * 5
    assert "doc_id" in errors[0] and "512" in errors[1] and "text" in errors[2]
    assert "locale" in errors[3] and "NUL" in errors[4]
    assert states(report)[5] is DocState.ADDED
    assert states(report)[6] is DocState.REJECTED and "twice" in errors[6]
    assert pipeline.manifest.count(deadline=unrequested_deadline()) == 1


def test_an_index_written_before_struct_v4_embeds_again_only_chunks_under_parent_titles(
    pipeline: IndexingPipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """struct-v4 embeds a chunk that opens with its own heading under its
    parents' titles: an index the previous release wrote re-embeds exactly
    those chunks on its next sync, not the others."""
    page = "# Guide\n\n" + "Opening words of the guide. " * 12 + "\n\n" + LONG
    with monkeypatch.context() as previous_release:  # its chunk hash and chunker version
        previous_release.setattr(
            planning, "chunk_hash", lambda path, text: content_hash(path + "\n" + text)
        )
        key = pipeline.planner._params_key.replace("struct-v4", "struct-v3")
        previous_release.setattr(pipeline.planner, "_params_key", key)
        pipeline.upsert([doc("a", page)])
    again = pipeline.upsert([doc("a", page)])
    (plan,) = again.plans
    under_parents = [c for c in plan.chunks if c.text.startswith("## ")]
    assert plan.state is DocState.CHANGED and under_parents
    assert [c.chunk_id for c in plan.to_embed] == [c.chunk_id for c in under_parents]
    assert all(c.heading_path.startswith("Guide > Part") for c in plan.to_embed)
    assert states(pipeline.upsert([doc("a", page)])) == [DocState.UNCHANGED]
