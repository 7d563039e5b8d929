"""The index manifest: what is indexed, per (doc_id, locale), with its hashes.

The manifest is written only after both stores accepted a run's writes, so it
never claims more than the stores hold. Before the first store write a run
records one `RunIntent` per document: the committed rows it is about to
overwrite, rewrite or delete, as they were, and the ids of the rows it adds.
That is enough to undo the run without its input, which is what recovery
does with every run that never committed (services.indexer.transactions).

`Manifest` is the interface; `SqliteManifest` (embedded mode),
`OpenSearchManifest` (server mode) and `PostgresManifest` (PostgreSQL mode)
fill it.

Deadlines: every read requires a `deadline` (a request's, or for reads no
request makes, such as recovery and Stats, one built from a declared timeout:
`base.unrequested_deadline`), so none can be issued without one; every
write of a run takes an optional one (undo and recovery write under the
store's own timeout). They apply as the stores' do (`base.call_budget_s`):
none left is `DeadlineExceeded` ("no time left") before any work; a server
manifest sends the time left as the call's timeout (PostgreSQL: a
transaction-local statement_timeout); SQLite only checks before it starts.
`entries()` is an audit's whole scan and, like a store's `scan`, runs under
the manifest's own timeout per call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from services.core.deadline import Deadline
from services.core.models import StoredChunk

# Index-level records of the models the index was embedded with (JSON of an
# EmbeddingIdentity); the second (cross-lingual) model's is "" for none.
EMBEDDING_META = "embedding"
CROSS_LINGUAL_META = "cross_lingual_embedding"


@dataclass(frozen=True)
class ManifestEntry:
    doc_id: str
    locale: str
    scope_id: str
    content_hash: str  # hash of the document body
    metadata_hash: str  # hash of url/title/scope/metadata
    chunk_ids: tuple[str, ...]  # in position order
    chunk_hashes: tuple[str, ...]  # content hash per chunk, same order
    updated_at: str = ""


@dataclass(frozen=True)
class RunIntent:
    """One document's part of a run, recorded before the run writes anything."""

    generation: int
    doc_id: str
    locale: str
    old_entry: ManifestEntry | None  # the committed entry the run replaces
    written_ids: tuple[str, ...]  # rows the run writes text for
    saved_rows: tuple[StoredChunk, ...]  # committed rows it changes, as they were

    @property
    def key(self) -> tuple[str, str]:
        return (self.doc_id, self.locale)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> RunIntent:
        fields: dict[str, Any] = json.loads(raw)
        old = fields["old_entry"]
        return cls(
            generation=int(fields["generation"]),
            doc_id=fields["doc_id"],
            locale=fields["locale"],
            old_entry=_entry_from_dict(old) if old else None,
            written_ids=tuple(fields["written_ids"]),
            saved_rows=tuple(StoredChunk(**row) for row in fields["saved_rows"]),
        )


@dataclass(frozen=True)
class RunState:
    """What a run reads before it starts, in one round trip: the commit
    point (its generation is the next) and the intents of unfinished runs."""

    committed_generation: int
    intents: tuple[RunIntent, ...]


def _entry_from_dict(fields: dict[str, Any]) -> ManifestEntry:
    return ManifestEntry(
        **{
            **fields,
            "chunk_ids": tuple(fields["chunk_ids"]),
            "chunk_hashes": tuple(fields["chunk_hashes"]),
        }
    )


@runtime_checkable
class Manifest(Protocol):
    def get(self, doc_id: str, locale: str, deadline: Deadline) -> ManifestEntry | None: ...

    def get_many(
        self, keys: Sequence[tuple[str, str]], deadline: Deadline
    ) -> dict[tuple[str, str], ManifestEntry]:
        """The entries of these keys (missing ones left out), within `deadline`."""
        ...

    def put_many(self, entries: Sequence[ManifestEntry], deadline: Deadline) -> None:
        """Insert or replace entries atomically (all or none), within `deadline`
        (every write alike)."""
        ...

    def delete_many(self, keys: Sequence[tuple[str, str]], deadline: Deadline) -> None:
        """Remove entries atomically."""
        ...

    def begin_run(self, intents: Sequence[RunIntent], deadline: Deadline) -> None:
        """Record a run's intents (all or none) before its first store write."""
        ...

    def open_intents(self, deadline: Deadline) -> list[RunIntent]:
        """Intents of runs that have not finished: committed ones whose
        intents were not yet cleared, and ones to undo."""
        ...

    def run_state(self, deadline: Deadline) -> RunState:
        """The committed generation and `open_intents`, read together (one
        round trip where the backend allows: SQLite, PostgreSQL)."""
        ...

    def commit_run(
        self,
        generation: int,
        entries: Sequence[ManifestEntry],
        removed: Sequence[tuple[str, str]],
        deadline: Deadline,
        meta: Mapping[str, str] | None = None,
    ) -> None:
        """Make a run's documents the committed ones and advance
        `committed_generation` to `generation`, together with the index-level
        values `meta` (the run's counts: no round trip of their own); then
        clear the run's intents. The generation is the commit point:
        `deadline` bounds the work up to it, never what follows it (a
        committed run must not be reported as failed)."""
        ...

    def clear_intents(self, generation: int, deadline: Deadline) -> None:
        """Forget a run's intents (after it committed or was undone)."""
        ...

    def entries(self) -> Iterable[ManifestEntry]:
        """Every committed entry (audits)."""
        ...

    def keys_in_scope(self, scope_id: str, deadline: Deadline) -> Iterable[tuple[str, str]]: ...

    def locales_of(self, doc_id: str, deadline: Deadline) -> list[str]: ...

    def count(self, deadline: Deadline) -> int: ...

    def chunk_counts_by_locale(self, deadline: Deadline) -> dict[str, int]: ...

    def locales_in(
        self, scope_ids: Sequence[str], doc_ids: Sequence[str], deadline: Deadline
    ) -> list[str]:
        """The locales that hold chunks among the committed entries of these
        scopes (empty: every scope) and these documents (empty: every
        document), sorted, within `deadline` (a Retrieve's read: which
        locales its scope can rank apart)."""
        ...

    def get_meta(self, key: str, deadline: Deadline) -> str | None:
        """Index-level values (chunking parameters, last run's counts, the
        committed generation a Retrieve reads), within `deadline`."""
        ...

    def set_meta(self, key: str, value: str, deadline: Deadline) -> None: ...

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        """Call `on_retry` before every retried write; False when the manifest
        never retries (SQLite)."""
        ...

    def close(self) -> None: ...
