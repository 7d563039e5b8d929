"""Runs are all or nothing: intents before the first write, undo without the input.

`RunJournal.begin` records, per document, the committed rows the run will
overwrite, rewrite or delete (read back from the stores as they are) and the
ids of the rows it writes. The stores then take the run's rows, stamped with
its generation, which keeps them out of every search until the manifest
commits that generation (services.storage.visibility).

`RunJournal.recover` settles every run that left intents behind: one whose
generation committed only has its intents cleared; any other is undone: the
rows it added are deleted, the saved rows written back as they were (their
text re-embedded; a metadata-only change is reverted by a payload rewrite)
and its documents' manifest entries put back. Undo is idempotent, so a crash
during recovery is recovered by the next one.

`begin` runs under the run's deadline, as the run's writes do; recovery and
undo never do: they put back what a failed run (often one whose deadline
passed) changed, and one cut short would leave it for the next recovery.
Their writes are bounded by each store's own timeout, their reads by
`unrequested_deadline()` (as long as any store timeout may be).

Manifest round trips of a run: `settle` reads the open intents and the
commit point together (`Manifest.run_state`), which also gives the run its
generation; the planner's read of the entries travels with each plan
(`DocumentPlan.old`), so `begin` does not read them again; then `begin_run`
and `commit_run`. Four in all, whatever the batch's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from services.core.deadline import Deadline
from services.core.logging import get_logger
from services.core.models import StoredChunk
from services.embedding.embedder import Embedder
from services.indexer.planning import DocState, DocumentPlan
from services.storage.base import unrequested_deadline
from services.storage.manifest import ManifestEntry, RunIntent
from services.storage.payload import payload_of_stored
from services.storage.storage import Storage, chunk_from_stored

log = get_logger(__name__)


@dataclass(frozen=True)
class Recovery:
    """What `recover` did: runs whose intents it cleared or undid."""

    committed_runs: int = 0
    undone_runs: int = 0
    documents: int = 0
    rows_deleted: int = 0
    rows_restored: int = 0

    def as_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.__dict__.items()}


def changes_index(plan: DocumentPlan) -> bool:
    return plan.state not in (DocState.UNCHANGED, DocState.REJECTED)


class RunJournal:
    """Writes a run's intents and undoes runs that never committed."""

    def __init__(self, embedder: Embedder, storage: Storage) -> None:
        self.storage = storage
        self.writer = storage.writer(embedder)
        self.vectors, self.lexical = storage.vectors, storage.lexical
        self.manifest = storage.manifest

    def begin(self, generation: int, plans: Sequence[DocumentPlan], deadline: Deadline) -> None:
        """Record the run's intents: each plan's `old` entry (read when it
        was planned) and the committed rows it changes, read back now."""
        changing = [p for p in plans if changes_index(p)]
        touched = {p.key: _touched_committed_ids(p, p.old) for p in changing}
        saved = self._saved_rows([cid for ids in touched.values() for cid in ids], deadline)
        intents = [
            self._intent(generation, p, p.old, [saved[c] for c in touched[p.key] if c in saved])
            for p in changing
        ]
        self.manifest.begin_run(intents, deadline)

    def _intent(
        self,
        generation: int,
        plan: DocumentPlan,
        old: ManifestEntry | None,
        saved: list[StoredChunk],
    ) -> RunIntent:
        return RunIntent(
            generation=generation,
            doc_id=plan.doc_id,
            locale=plan.locale,
            old_entry=old,
            written_ids=tuple(c.chunk_id for c in plan.to_embed),
            saved_rows=tuple(saved),
        )

    def _saved_rows(self, wanted: Sequence[str], deadline: Deadline) -> dict[str, StoredChunk]:
        """The committed rows the run changes, from the lexical store (it
        holds the text), the vector store for any the lexical store lacks."""
        rows = {row.chunk_id: row for row in self.lexical.get(wanted, deadline)}
        missing = [cid for cid in wanted if cid not in rows]
        rows.update({row.chunk_id: row for row in self.vectors.get(missing, deadline)})
        return rows

    def recover(self) -> Recovery:
        return self.settle()[0]

    def settle(self) -> tuple[Recovery, int]:
        """Recover, and the generation the next run takes (the committed
        one + 1, read in the same manifest round trip as the intents)."""
        state = self.manifest.run_state(unrequested_deadline())
        next_generation = state.committed_generation + 1
        if not state.intents:
            return Recovery(), next_generation
        return self._recover(state.intents, state.committed_generation), next_generation

    def _recover(self, intents: Sequence[RunIntent], committed: int) -> Recovery:
        by_run: dict[int, list[RunIntent]] = {}
        for intent in intents:
            by_run.setdefault(intent.generation, []).append(intent)
        result = Recovery()
        for generation, run in sorted(by_run.items()):
            if generation <= committed:
                self.manifest.clear_intents(generation, unrequested_deadline())
                result = replace(result, committed_runs=result.committed_runs + 1)
            else:
                result = _add(result, self.undo(generation, run))
        log.info("runs_recovered", committed_generation=committed, **result.as_dict())
        return result

    def undo(self, generation: int, intents: Sequence[RunIntent]) -> Recovery:
        """Put back what the run changed, then forget its intents. Each call
        takes a fresh deadline of its own, never the run's: a run undone
        because its deadline passed must still be undone whole."""
        saved = [row for i in intents for row in i.saved_rows]
        saved_ids = {row.chunk_id for row in saved}
        added = sorted({cid for i in intents for cid in i.written_ids} - saved_ids)
        self.writer.delete(added, unrequested_deadline())
        restored_rows = self._restore(saved, {cid for i in intents for cid in i.written_ids})
        restored = [i.old_entry for i in intents if i.old_entry is not None]
        self.manifest.put_many(restored, unrequested_deadline())
        self.manifest.delete_many(
            [i.key for i in intents if i.old_entry is None], unrequested_deadline()
        )
        self.manifest.clear_intents(generation, unrequested_deadline())
        log.warning(
            "run_undone",
            generation=generation,
            documents=len(intents),
            rows_deleted=len(added),
            rows_restored=restored_rows,
            rows_untouched=len(saved) - restored_rows,
        )
        return Recovery(0, 1, len(intents), len(added), restored_rows)

    def _restore(self, rows: Sequence[StoredChunk], overwritten: set[str]) -> int:
        """Rows whose text the run replaced, or that it deleted, are written
        whole (re-embedded); the others only had their payload rewritten.
        Rows the run never reached (both stores still hold them as saved) are
        left alone: a run killed early in a large batch of changed pages had
        planned to overwrite every row, and re-embedding all of them held a
        restart for 40-60 s (probe). Returns how many rows were written."""
        ids = [r.chunk_id for r in rows]
        in_vectors = {row.chunk_id: row for row in self.vectors.get(ids, unrequested_deadline())}
        in_lexical = {row.chunk_id: row for row in self.lexical.get(ids, unrequested_deadline())}
        rows = [
            r
            for r in rows
            if not (
                _as_saved(r, in_vectors.get(r.chunk_id))
                and _as_saved(r, in_lexical.get(r.chunk_id))
            )
        ]
        present = in_vectors.keys() & in_lexical.keys()
        rewrite = {
            r.chunk_id for r in rows if r.chunk_id not in overwritten and r.chunk_id in present
        }
        whole = [chunk_from_stored(r) for r in rows if r.chunk_id not in rewrite]
        updates = [(r.chunk_id, payload_of_stored(r)) for r in rows if r.chunk_id in rewrite]
        self.writer.rewrite(updates, unrequested_deadline())
        self.writer.write(whole, deadline=unrequested_deadline())
        return len(rows)


def _as_saved(saved: StoredChunk, current: StoredChunk | None) -> bool:
    """The store still holds the row as it was saved: a run stamps its own
    generation on every row it writes (text or payload), so a row with the
    saved generation and content was never written by it."""
    return (
        current is not None
        and current.generation == saved.generation
        and current.content_hash == saved.content_hash
    )


def _touched_committed_ids(plan: DocumentPlan, old: ManifestEntry | None) -> list[str]:
    """Committed rows the plan overwrites, rewrites or deletes."""
    committed = set(old.chunk_ids) if old else set()
    ids = [c.chunk_id for c in plan.to_embed] + [cid for cid, _ in plan.payload_updates]
    return sorted({cid for cid in ids if cid in committed} | set(plan.to_delete))


def _add(a: Recovery, b: Recovery) -> Recovery:
    return Recovery(
        *(x + y for x, y in zip(a.as_dict().values(), b.as_dict().values(), strict=True))
    )
