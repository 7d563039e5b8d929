"""`verify` and `verify --repair`: audit (services.indexer.audit), then fix
what can be fixed without the documents.

Repairs, all idempotent (a second run finds nothing):
- an orphan or uncommitted row is deleted from the store that holds it;
- a chunk one store lacks, or holds differently from the manifest, is
  rewritten from the other store when that one agrees with the manifest on
  every field: a whole row (re-embedded for the vector store) when the text
  or document differs or the row is missing, a payload rewrite when only
  url/title/metadata/scope/locale differ;
- a chunk neither store holds as the manifest records it cannot be rebuilt
  without its document: it is reported as unrepairable, naming the document
  to re-ingest, and its manifest hash is blanked so that re-ingest rewrites it
  (an unchanged document is otherwise skipped).
Unfinished runs are settled first (their intents undo them), so a repair
never fights a recovery.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from services.core.logging import get_logger
from services.core.models import StoredChunk
from services.embedding.embedder import Embedder
from services.indexer.audit import (
    LEXICAL,
    VECTORS,
    AuditProgress,
    AuditReport,
    Finding,
    ProgressFn,
    compare,
    read_snapshot,
    scope_counts,
)
from services.storage.base import LexicalStore, VectorStore, unrequested_deadline
from services.storage.payload import payload_of_stored
from services.storage.storage import ChunkWriter, Part, Storage, chunk_from_stored

log = get_logger(__name__)
REPAIRED = "repaired"
# Fields a payload rewrite cannot fix: the row is written whole.
_WHOLE_ROW_FIELDS = frozenset({"content_hash", "doc_id"})


@dataclass
class RepairPlan:
    """What to write to one store."""

    delete: list[str]
    whole: list[StoredChunk]
    payload: list[StoredChunk]


class IndexVerifier:
    def __init__(
        self,
        embedder: Embedder,
        storage: Storage,
        recover: Callable[[], object],
    ) -> None:
        self.storage, self.manifest = storage, storage.manifest
        self.stores: dict[str, VectorStore | LexicalStore] = {
            VECTORS: storage.vectors,
            LEXICAL: storage.lexical,
        }
        # A repair writes one store at a time: the one a finding is about.
        self.writers: dict[str, ChunkWriter] = {
            VECTORS: storage.writer(embedder, frozenset({Part.VECTOR})),
            LEXICAL: storage.writer(embedder, frozenset({Part.LEXICAL})),
        }
        self.recover = recover

    def verify(self, repair: bool = False, progress: ProgressFn | None = None) -> AuditReport:
        report_progress = progress or (lambda _: None)
        if repair:
            self.recover()
        snapshot = read_snapshot(self.storage, report_progress)
        findings = compare(snapshot)
        report_progress(AuditProgress("compare", len(findings), len(findings)))
        if repair and findings:
            findings = self._repair(findings, report_progress)
        report = AuditReport(
            snapshot.committed_generation,
            snapshot.documents,
            scope_counts(snapshot),
            findings,
            repair,
        )
        log.info("index_verified", findings=len(findings), clean=report.clean, repair=repair)
        report_progress(AuditProgress("done", len(findings), len(findings)))
        return report

    def _repair(self, findings: list[Finding], progress: ProgressFn) -> list[Finding]:
        flawed = defaultdict(set)
        for f in findings:
            flawed[f.store].add(f.chunk_id)
        good = self._good_rows(findings, flawed)
        plans = {store: RepairPlan([], [], []) for store in self.stores}
        outcomes = [self._plan_fix(f, good, plans) for f in findings]
        for done, (store, plan) in enumerate(plans.items(), 1):
            self._apply(store, plan)
            progress(AuditProgress("repair", done, len(plans)))
        self._mark_for_rewrite([f for f in outcomes if f.repair.startswith("unrepairable")])
        return outcomes

    def _mark_for_rewrite(self, unrepairable: Sequence[Finding]) -> None:
        """Blank the manifest hashes of chunks only their document can
        rebuild: a blank hash equals no real one, so the document's next
        ingest plans it as changed and rewrites exactly those chunks."""
        lost: dict[tuple[str, str], set[str]] = defaultdict(set)
        for f in unrepairable:
            lost[(f.doc_id, f.locale)].add(f.chunk_id)
        entries = self.manifest.get_many(list(lost), unrequested_deadline())
        marked = [
            replace(
                entry,
                content_hash="",
                chunk_hashes=tuple(
                    "" if cid in lost[key] else h
                    for cid, h in zip(entry.chunk_ids, entry.chunk_hashes, strict=True)
                ),
            )
            for key, entry in entries.items()
        ]
        self.manifest.put_many(marked, unrequested_deadline())

    def _good_rows(
        self, findings: Sequence[Finding], flawed: dict[str, set[str]]
    ) -> dict[tuple[str, str], StoredChunk]:
        """For each (store to fix, chunk): the other store's row, if it has no finding."""
        wanted: dict[str, set[str]] = defaultdict(set)
        for f in findings:
            other = _other(f.store)
            if f.kind in ("missing", "mismatch") and f.chunk_id not in flawed[other]:
                wanted[other].add(f.chunk_id)
        good: dict[tuple[str, str], StoredChunk] = {}
        for source, ids in wanted.items():
            for row in self.stores[source].get(sorted(ids), unrequested_deadline()):
                good[(_other(source), row.chunk_id)] = row
        return good

    def _plan_fix(
        self, f: Finding, good: dict[tuple[str, str], StoredChunk], plans: dict[str, RepairPlan]
    ) -> Finding:
        plan = plans[f.store]
        if f.kind in ("orphan", "uncommitted"):
            plan.delete.append(f.chunk_id)
            return replace(f, repair=REPAIRED)
        row = good.get((f.store, f.chunk_id))
        if row is None:
            why = (
                "unrepairable: neither store holds it as the manifest records it; "
                f"marked for rewrite: re-ingest document {f.doc_id!r}"
            )
            return replace(f, repair=why)
        whole = f.kind == "missing" or f.field in _WHOLE_ROW_FIELDS
        target = plan.whole if whole else plan.payload
        if all(r.chunk_id != row.chunk_id for r in target):
            target.append(row)
        return replace(f, repair=REPAIRED)

    def _apply(self, store: str, plan: RepairPlan) -> None:
        writer = self.writers[store]
        # A repair is an audit's work, which no request's deadline covers.
        writer.delete(sorted(set(plan.delete)), unrequested_deadline())
        whole_ids = {row.chunk_id for row in plan.whole}
        payloads = [
            (r.chunk_id, payload_of_stored(r)) for r in plan.payload if r.chunk_id not in whole_ids
        ]
        writer.rewrite(payloads, unrequested_deadline())
        writer.write(
            [chunk_from_stored(row) for row in plan.whole], deadline=unrequested_deadline()
        )


def _other(store: str) -> str:
    return LEXICAL if store == VECTORS else VECTORS
