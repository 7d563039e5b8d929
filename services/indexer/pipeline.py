"""Apply index plans to both stores, crash-safely.

Order of a real run: record pending chunk ids → embed and upsert changed
chunks (vectors, then lexical rows) → payload updates → deletes → commit the
manifest → let an embedded vector store build its search index if due.
Every store write is an idempotent upsert/delete by stable id, so a run
killed anywhere and re-run converges to the same state; the manifest only
records a document after both stores accepted it. Transient store errors are
retried with backoff inside the server store adapters
(services.common.stores.server_calls), once; a write that still fails ends
the run, and the next run redoes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar

from services.common.embedding import Embedder
from services.common.logging import get_logger
from services.common.models import Chunk, Document
from services.common.stores.base import LexicalStore, VectorStore
from services.common.stores.manifest import Manifest
from services.indexer.planning import DocState, DocumentPlan, PlanCounts, Planner

log = get_logger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Progress:
    documents_done: int
    documents_total: int
    chunks_embedded: int


ProgressFn = Callable[[Progress], None]


@dataclass
class IndexReport:
    plans: list[DocumentPlan]
    dry_run: bool
    counts: PlanCounts = field(init=False)

    def __post_init__(self) -> None:
        self.counts = PlanCounts.of(self.plans)


def embedding_text(chunk: Chunk) -> str:
    """What the encoder sees: the heading path gives a chunk its topic, and it
    is part of the chunk's content hash, so changing it re-embeds."""
    if chunk.heading_path and not chunk.text.lstrip().startswith("#"):
        return f"{chunk.heading_path}\n\n{chunk.text}"
    return chunk.text


def batched(items: Sequence[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class IndexingPipeline:
    def __init__(
        self,
        planner: Planner,
        embedder: Embedder,
        vectors: VectorStore,
        lexical: LexicalStore,
        manifest: Manifest,
        *,
        write_batch: int = 256,
    ) -> None:
        self.planner = planner
        self.embedder = embedder
        self.vectors = vectors
        self.lexical = lexical
        self.manifest = manifest
        self.write_batch = write_batch
        self.manifest.set_meta("chunking", json.dumps(planner.chunker.params.as_dict()))

    def upsert(
        self, docs: Sequence[Document], *, dry_run: bool = False, progress: ProgressFn | None = None
    ) -> IndexReport:
        return self._run(self.planner.plan_upserts(docs), dry_run, progress)

    def delete(
        self, doc_ids: Sequence[str], locale: str = "", *, dry_run: bool = False
    ) -> IndexReport:
        keys = [
            (doc_id, loc)
            for doc_id in doc_ids
            for loc in ([locale] if locale else self.manifest.locales_of(doc_id) or [""])
        ]
        return self._run(self.planner.plan_removals(keys), dry_run, None)

    def sync(
        self,
        scope_id: str,
        docs: Sequence[Document],
        keep: Sequence[tuple[str, str]] = (),
        *,
        dry_run: bool = False,
        progress: ProgressFn | None = None,
    ) -> IndexReport:
        """Upsert `docs` into the scope and remove every document of the scope
        that is neither in `docs` nor in `keep` (already sent in earlier batches)."""
        present = {(d.doc_id, d.locale) for d in docs} | set(keep)
        gone = [k for k in self.manifest.keys_in_scope(scope_id) if k not in present]
        plans = self.planner.plan_upserts(docs) + self.planner.plan_removals(gone)
        return self._run(plans, dry_run, progress)

    def _run(
        self, plans: list[DocumentPlan], dry_run: bool, progress: ProgressFn | None
    ) -> IndexReport:
        report = IndexReport(plans, dry_run)
        if not dry_run:
            self._apply(plans, progress)
            self.manifest.set_meta("last_run", json.dumps(report.counts.as_dict()))
            self._optimize_vectors()
        log.info("index_run", dry_run=dry_run, **report.counts.as_dict())
        return report

    def _apply(self, plans: list[DocumentPlan], progress: ProgressFn | None) -> None:
        pending = {p.key: [c.chunk_id for c in p.to_embed] for p in plans if p.to_embed}
        if pending:
            self.manifest.add_pending(pending)
        self._write_new_chunks(plans, progress)
        updates = [u for p in plans for u in p.payload_updates]
        for batch in batched(updates, self.write_batch):
            self.vectors.update_payload(batch)
            self.lexical.update_payload(batch)
        deletes = [cid for p in plans for cid in p.to_delete]
        for ids in batched(deletes, self.write_batch):
            self.vectors.delete(ids)
            self.lexical.delete(ids)
        self._commit_manifest(plans)

    def _optimize_vectors(self) -> None:
        """Embedded vector stores have no background optimizer: run theirs
        after every real run (also one that changed nothing, so an index
        written before the store had an HNSW index gets one). The engine
        decides what is due and returns at once when nothing is (a server
        store: always); the data is committed already, so a failure here is
        logged, not raised."""
        started = time.perf_counter()
        try:
            changed = self.vectors.optimize()
        except Exception as exc:
            log.warning("vector_optimize_failed", store=self.vectors.name, error=str(exc))
            return
        if changed:
            seconds = round(time.perf_counter() - started, 2)
            log.info("vector_index_optimized", store=self.vectors.name, seconds=seconds)

    def _write_new_chunks(self, plans: list[DocumentPlan], progress: ProgressFn | None) -> None:
        total_docs = len(plans)
        done_docs = sum(1 for p in plans if not p.to_embed)
        embedded = 0
        for plan_group in _group_by_chunk_budget(plans, self.write_batch):
            chunks = [c for p in plan_group for c in p.to_embed]
            vectors = self.embedder.embed_documents([embedding_text(c) for c in chunks])
            self.vectors.upsert(chunks, vectors.tolist())
            self.lexical.upsert(chunks)
            embedded += len(chunks)
            done_docs += len(plan_group)
            if progress:
                progress(Progress(done_docs, total_docs, embedded))
        if progress and embedded == 0:
            progress(Progress(total_docs, total_docs, 0))

    def _commit_manifest(self, plans: list[DocumentPlan]) -> None:
        kept = [p.entry for p in plans if p.entry is not None and p.state is not DocState.UNCHANGED]
        removed = [p.key for p in plans if p.state is DocState.REMOVED]
        if kept:
            self.manifest.put_many(kept)
        if removed:
            self.manifest.delete_many(removed)


def _group_by_chunk_budget(plans: list[DocumentPlan], budget: int) -> Iterator[list[DocumentPlan]]:
    """Groups of whole documents with about `budget` new chunks each, so
    memory stays bounded and progress advances per document."""
    group: list[DocumentPlan] = []
    size = 0
    for plan in (p for p in plans if p.to_embed):
        group.append(plan)
        size += len(plan.to_embed)
        if size >= budget:
            yield group
            group, size = [], 0
    if group:
        yield group


@dataclass(frozen=True)
class IndexStats:
    documents: int
    chunks: int
    chunks_by_locale: dict[str, int]
    vectors: int
    lexical_rows: int
    chunking: dict[str, Any]
    last_run: dict[str, int]


def collect_stats(pipeline: IndexingPipeline) -> IndexStats:
    by_locale = pipeline.manifest.chunk_counts_by_locale()
    return IndexStats(
        documents=pipeline.manifest.count(),
        chunks=sum(by_locale.values()),
        chunks_by_locale=by_locale,
        vectors=pipeline.vectors.count(),
        lexical_rows=pipeline.lexical.count(),
        chunking=json.loads(pipeline.manifest.get_meta("chunking") or "{}"),
        last_run=json.loads(pipeline.manifest.get_meta("last_run") or "{}"),
    )
