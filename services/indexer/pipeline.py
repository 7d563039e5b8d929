"""Apply index plans to both stores, all or nothing.

Order of a real run: settle runs left unfinished (services.indexer.transactions)
→ record this run's intents → embed and upsert changed chunks (vectors, then
lexical rows) → payload updates → deletes → commit the manifest and the run's
generation together → let an embedded vector store build its search index if
due. Every row the run writes carries its generation, so no search sees it
before the commit; a run that fails, passes its caller's deadline or loses
its caller is undone on the spot (or, if the process died, by the recovery
at the next start or run). Every store call of the run carries its deadline
(`RunControl.write_deadline`), so none waits past it; undoing a failed run
does not (see `_undo_after_failure`). Transient store errors are retried
with backoff inside the server store adapters, never past that deadline
(services.storage.server.calls).
With `metrics` (services.indexer.metrics), runs report their documents by
state, the chunks they embed and the time of every write batch to a store;
with a `tracer`, planning, each embedding batch, each store write and the
commit are spans under the RPC's span.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import TypeVar

from opentelemetry import trace

from services.core.deadline import Deadline
from services.core.field_rules import language_tag_problem
from services.core.logging import get_logger
from services.core.models import Document
from services.embedding.embedder import Embedder
from services.indexer.metrics import IndexerMetrics
from services.indexer.planning import DocState, DocumentPlan, PlanCounts, Planner
from services.indexer.run_control import RunControl
from services.indexer.sync_guard import LAST_SYNC_META, check_no_sync_since
from services.indexer.transactions import Recovery, RunJournal, changes_index
from services.runtime.security.callers import ScopeGrant
from services.storage.base import unrequested_deadline
from services.storage.storage import Storage

log = get_logger(__name__)
T = TypeVar("T")
LAST_RUN_META = "last_run"  # the counts of the last real run (Stats)


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
    # The index's once the run ended: the run's own when it changed the index.
    committed_generation: int = 0
    counts: PlanCounts = field(init=False)

    def __post_init__(self) -> None:
        self.counts = PlanCounts.of(self.plans)


def batched(items: Sequence[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class IndexingPipeline:
    def __init__(
        self,
        planner: Planner,
        embedder: Embedder,
        storage: Storage,
        *,
        write_batch: int = 256,
        defer_vector_builds: bool = False,
        build_in_run: bool = True,
        on_commit: Callable[[int], None] | None = None,
        metrics: IndexerMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.planner = planner
        self.embedder = embedder
        self.storage = storage
        self.vectors, self.manifest = storage.vectors, storage.manifest
        self.write_batch = write_batch
        # True: after a run the vector store may defer its build while a bulk
        # load goes on; whoever calls `settle_vectors` once runs stop coming
        # (the servicer, after RAG_VECTOR_SETTLE_AFTER_S idle) builds the rest.
        self.defer_vector_builds = defer_vector_builds
        # False: a run returns once committed, and its caller calls
        # `build_vectors_after_run` after it replied (the servicer: a build can
        # take minutes, and a caller whose deadline passed or whose Indexer was
        # killed meanwhile took a committed run for a failed one).
        self.build_in_run = build_in_run
        self.writer = storage.writer(embedder, timed=self._timed)
        self.journal = RunJournal(embedder, storage)
        # Tells an in-process Retriever at once which generation it may serve.
        self.on_commit = on_commit
        self.metrics = metrics
        self.tracer = tracer or trace.NoOpTracer()
        chunking = json.dumps(planner.chunker.params.as_dict())
        self.manifest.set_meta("chunking", chunking, unrequested_deadline())

    def recover(self) -> Recovery:
        """Settle runs a crash left unfinished (also done before every run).
        Not under the new run's deadline: an undo is never cut short."""
        return self.journal.recover()

    def upsert(
        self,
        docs: Sequence[Document],
        *,
        dry_run: bool = False,
        progress: ProgressFn | None = None,
        control: RunControl | None = None,
    ) -> IndexReport:
        _, generation = self.journal.settle()
        control = control or RunControl()
        with self.tracer.start_as_current_span("plan", attributes={"rag.documents": len(docs)}):
            plans = self.planner.plan_upserts(docs, control.check, deadline=control.deadline)
        return self._run("upsert", plans, generation, dry_run, progress, control)

    def delete(
        self,
        doc_ids: Sequence[str],
        locale: str = "",
        *,
        dry_run: bool = False,
        control: RunControl | None = None,
        scopes: ScopeGrant | None = None,
    ) -> IndexReport:
        """Remove documents; with `scopes`, only those in the scopes granted."""
        _, generation = self.journal.settle()
        control = control or RunControl()
        keys = [
            (doc_id, loc)
            for doc_id in doc_ids
            for loc in (
                [locale] if locale else self.manifest.locales_of(doc_id, control.deadline) or [""]
            )
        ]
        plans = self.planner.plan_removals(keys, scopes, deadline=control.deadline)
        return self._run("delete", plans, generation, dry_run, None, control)

    def sync(
        self,
        scope_id: str,
        docs: Sequence[Document],
        keep: Sequence[tuple[str, str]] = (),
        *,
        dry_run: bool = False,
        progress: ProgressFn | None = None,
        control: RunControl | None = None,
        no_sync_since: int | None = None,
    ) -> IndexReport:
        """Upsert `docs` into the scope and remove every document of the scope
        that is neither in `docs` nor in `keep` (already sent in earlier batches).
        `no_sync_since`: refuse (Aborted) when another Sync of the scope
        committed after that generation (see `check_no_sync_since`)."""
        _, generation = self.journal.settle()
        control = control or RunControl()
        deadline = control.deadline
        sync_key = LAST_SYNC_META + scope_id
        if no_sync_since is not None:
            check_no_sync_since(self.manifest.get_meta(sync_key, deadline), no_sync_since, scope_id)
        present = {(d.doc_id, d.locale) for d in docs} | set(keep)
        # A page sent with a locale that is no tag names no version: all of its
        # committed versions stay (it is rejected, and a caller's mistake must
        # not delete the page it meant to update).
        unsure = {d.doc_id for d in docs if language_tag_problem(d.locale) is not None}
        with self.tracer.start_as_current_span("plan", attributes={"rag.documents": len(docs)}):
            committed = self.manifest.keys_in_scope(scope_id, deadline)
            gone = [k for k in committed if k not in present and k[0] not in unsure]
            upserts = self.planner.plan_upserts(docs, control.check, deadline=deadline)
            plans = upserts + self.planner.plan_removals(gone, deadline=deadline)
        meta = {sync_key: str(generation)}
        return self._run("sync", plans, generation, dry_run, progress, control, meta)

    def _run(
        self,
        operation: str,
        plans: list[DocumentPlan],
        generation: int,
        dry_run: bool,
        progress: ProgressFn | None,
        control: RunControl,
        commit_meta: dict[str, str] | None = None,
    ) -> IndexReport:
        """`generation`: the one this run takes if it changes the index;
        `commit_meta`: index-level values committed with it if it does."""
        report = IndexReport(plans, dry_run, committed_generation=generation - 1)
        trace.get_current_span().set_attributes(
            {"rag.operation": operation, "rag.dry_run": dry_run, **_span_counts(report.counts)}
        )
        if not dry_run:
            last_run = {LAST_RUN_META: json.dumps(report.counts.as_dict())}
            if any(changes_index(p) for p in plans):
                self._check_disk_room(plans)
                # The run's counts are committed with it: no round trip of their own.
                self._apply(plans, generation, progress, control, last_run | (commit_meta or {}))
                report.committed_generation = generation
            else:
                with self._timed("manifest"):
                    # Nothing to commit: the counts alone, within the run's deadline.
                    counts = last_run[LAST_RUN_META]
                    self.manifest.set_meta(LAST_RUN_META, counts, control.write_deadline())
            if self.metrics is not None:
                # Counted once the run stands: a failed run raised above.
                self.metrics.record_run(operation, report.counts)
            if self.build_in_run:
                self.build_vectors_after_run()
        log.info("index_run", dry_run=dry_run, **report.counts.as_dict())
        return report

    def _check_disk_room(self, plans: list[DocumentPlan]) -> None:
        """Embedded: refused before anything is written when the run could
        fill the data folder's disk (services.storage.disk_room)."""
        if self.storage.disk_room is not None:
            chunks = [c for p in plans for c in p.to_embed]
            text_bytes = sum(len(c.text.encode("utf-8", "replace")) for c in chunks)
            self.storage.disk_room.check(len(chunks), text_bytes)

    def _apply(
        self,
        plans: list[DocumentPlan],
        generation: int,
        progress: ProgressFn | None,
        control: RunControl,
        meta: dict[str, str],
    ) -> None:
        # Where the backend has one transaction for all three parts, the run
        # is that transaction: a failure rolls it back, nothing to undo.
        with self.storage.run_transaction() as atomic:
            stamped = [_stamped(p, generation) for p in plans]
            self.journal.begin(generation, stamped, control.write_deadline())
            log.info(
                "index_run_writing",
                generation=generation,
                atomic=atomic,
                chunks_to_embed=sum(len(p.to_embed) for p in plans),
            )
            try:
                self._write(stamped, progress, control)
                control.check_commit()
                self._commit_manifest(generation, stamped, control.deadline, meta)
            except BaseException:
                if not atomic:
                    self._undo_after_failure(generation)
                raise
        if self.on_commit is not None:
            self.on_commit(generation)

    def _write(
        self, plans: list[DocumentPlan], progress: ProgressFn | None, control: RunControl
    ) -> None:
        self._write_new_chunks(plans, progress, control)
        deadline = control.write_deadline()
        updates = [u for p in plans for u in p.payload_updates]
        for batch in batched(updates, self.write_batch):
            control.check()
            self.writer.rewrite(batch, deadline)
        deletes = [cid for p in plans for cid in p.to_delete]
        for ids in batched(deletes, self.write_batch):
            control.check()
            self.writer.delete(ids, deadline)

    @contextmanager
    def _timed(self, store: str) -> Iterator[None]:
        """The block as one write batch to `store`: timed (with metrics) and a span."""
        with ExitStack() as stack:
            stack.enter_context(self.tracer.start_as_current_span(f"write {store}"))
            if self.metrics is not None:
                stack.enter_context(self.metrics.time_write(store))
            yield

    def _undo_after_failure(self, generation: int) -> None:
        """Undo now, so the caller's error means "nothing changed"; if the
        stores fail the undo too, the intents stay for the next recovery
        (the run's rows are invisible meanwhile). The undo runs without the
        run's deadline: that deadline has often just passed (it may be why
        the run failed), and an undo cut short would leave the run for the
        next recovery; each of its store calls is still bounded by the
        store's own timeout."""
        open_intents = self.manifest.open_intents(unrequested_deadline())
        intents = [i for i in open_intents if i.generation == generation]
        try:
            self.journal.undo(generation, intents)
        except Exception as exc:
            log.error("run_undo_failed", generation=generation, error=str(exc))

    def build_vectors_after_run(self) -> None:
        """What a real run leaves to build (after it, or after its reply when
        not `build_in_run`). During a load the store may defer its build
        (`settle_vectors` ends it)."""
        self._optimize_vectors(settle=not self.defer_vector_builds)

    def settle_vectors(self) -> None:
        """Build whatever the vector store deferred during a load (no run is
        in progress: the caller holds the runs' lock)."""
        self._optimize_vectors(settle=True)

    def _optimize_vectors(self, settle: bool) -> None:
        """Embedded vector stores have no background optimizer: run theirs
        after every real run (also one that changed nothing, so an index
        written before the store had an HNSW index gets one). The engine
        decides what is due and returns at once when nothing is (a server
        store: always); the data is committed already, so a failure here is
        logged, not raised. `settle`: VectorStore.optimize's."""
        started = time.perf_counter()
        try:
            changed = self.vectors.optimize(settle=settle)
        except Exception as exc:
            log.warning("vector_optimize_failed", store=self.vectors.name, error=str(exc))
            return
        if changed:
            seconds = round(time.perf_counter() - started, 2)
            log.info(
                "vector_index_optimized", store=self.vectors.name, seconds=seconds, settle=settle
            )

    def _write_new_chunks(
        self, plans: list[DocumentPlan], progress: ProgressFn | None, control: RunControl
    ) -> None:
        total_docs = len(plans)
        done_docs = sum(1 for p in plans if not p.to_embed)
        embedded = 0
        for plan_group in _group_by_chunk_budget(plans, self.write_batch):
            control.check()
            chunks = [c for p in plan_group for c in p.to_embed]
            with self.tracer.start_as_current_span("embed", attributes={"rag.chunks": len(chunks)}):
                vectors = self.writer.embed(chunks, between=control.check)
            if self.metrics is not None:
                self.metrics.add_embedded(len(chunks))
            self.writer.write(chunks, vectors, deadline=control.write_deadline())
            embedded += len(chunks)
            done_docs += len(plan_group)
            if progress:
                progress(Progress(done_docs, total_docs, embedded))
        if progress and embedded == 0:
            progress(Progress(total_docs, total_docs, 0))

    def _commit_manifest(
        self,
        generation: int,
        plans: list[DocumentPlan],
        deadline: Deadline,
        meta: dict[str, str],
    ) -> None:
        kept = [p.entry for p in plans if p.entry is not None and p.state is not DocState.UNCHANGED]
        removed = [p.key for p in plans if p.state is DocState.REMOVED]
        with self._timed("manifest"):
            self.manifest.commit_run(generation, kept, removed, deadline, meta)


def _span_counts(counts: PlanCounts) -> dict[str, int]:
    return {f"rag.documents.{name}": value for name, value in counts.as_dict().items()}


def _stamped(plan: DocumentPlan, generation: int) -> DocumentPlan:
    """The plan with every row it writes carrying the run's generation."""
    return replace(
        plan,
        to_embed=[replace(c, generation=generation) for c in plan.to_embed],
        payload_updates=[
            (cid, replace(p, generation=generation)) for cid, p in plan.payload_updates
        ],
    )


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
