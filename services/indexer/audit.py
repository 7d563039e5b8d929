"""`verify`: the manifest, the vector store and the lexical store, audited
against each other.

The manifest is the reference: it names every committed chunk with its
document, scope, locale, content hash and the document's metadata hash. Each
store is read whole (`scan`, page by page) and every row is compared with it:
a row the manifest does not name is an orphan (or `uncommitted`, when a run
that never committed wrote it), a chunk a store lacks is missing, and a row
whose document, scope, locale, text hash or url/title/metadata differ is a
mismatch, one finding per field. Only small summaries are kept in memory, so
an index of a million chunks audits in a few hundred megabytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from services.core.models import Document, StoredChunk
from services.indexer.identity import chunk_hash, metadata_hash
from services.storage.base import LexicalStore, VectorStore, unrequested_deadline
from services.storage.storage import Storage
from services.storage.visibility import committed_generation

VECTORS, LEXICAL = "vectors", "lexical"
COMPARED_FIELDS = ("doc_id", "locale", "scope_id", "content_hash", "metadata")


@dataclass(frozen=True)
class AuditProgress:
    phase: str  # manifest, vectors, lexical, compare, repair, done
    done: int
    total: int  # 0: unknown


ProgressFn = Callable[[AuditProgress], None]


@dataclass(frozen=True)
class RowSummary:
    """What the audit compares of one chunk (no text: memory stays small)."""

    doc_id: str
    locale: str
    scope_id: str
    content_hash: str
    metadata: str  # metadata hash of url/title/scope/metadata
    generation: int = 0

    def differences(self, other: RowSummary) -> list[tuple[str, str, str]]:
        """(field, expected, actual) for each compared field that differs."""
        return [
            (name, getattr(self, name), getattr(other, name))
            for name in COMPARED_FIELDS
            if getattr(self, name) != getattr(other, name)
        ]


def summarize(row: StoredChunk) -> RowSummary:
    document = Document(
        doc_id=row.doc_id,
        text="",
        url=row.url,
        title=row.title,
        locale=row.locale,
        scope_id=row.scope_id,
        metadata=dict(row.metadata),
    )
    return RowSummary(
        row.doc_id,
        row.locale,
        row.scope_id,
        # Re-hashed from the stored text and heading path (the planner's chunk
        # hash), not the stored hash field: text changed under an old hash shows.
        chunk_hash(row.heading_path, row.text),
        metadata_hash(document),
        row.generation,
    )


@dataclass(frozen=True)
class Finding:
    kind: str  # orphan, missing, mismatch, uncommitted
    store: str
    chunk_id: str
    doc_id: str
    locale: str
    field: str = ""
    expected: str = ""
    actual: str = ""
    repair: str = ""  # "repaired", "unrepairable: <why>", "" when not repairing


@dataclass(frozen=True)
class ScopeCount:
    scope_id: str
    locale: str
    manifest_chunks: int
    vectors: int
    lexical_rows: int


@dataclass
class AuditReport:
    committed_generation: int
    documents: int
    counts: list[ScopeCount]
    findings: list[Finding]
    repair: bool = False

    @property
    def repaired(self) -> int:
        return sum(1 for f in self.findings if f.repair == "repaired")

    @property
    def unrepairable(self) -> int:
        return sum(1 for f in self.findings if f.repair.startswith("unrepairable"))

    @property
    def clean(self) -> bool:
        """Nothing found, or everything found was repaired."""
        return all(f.repair == "repaired" for f in self.findings)


@dataclass
class IndexSnapshot:
    """The three sources, summarized."""

    committed_generation: int
    expected: dict[str, RowSummary] = field(default_factory=dict)
    documents: int = 0
    rows: dict[str, dict[str, RowSummary]] = field(default_factory=dict)


def read_snapshot(storage: Storage, progress: ProgressFn) -> IndexSnapshot:
    manifest = storage.manifest
    snapshot = IndexSnapshot(committed_generation(manifest, unrequested_deadline()))
    for entry in manifest.entries():
        snapshot.documents += 1
        for chunk_id, stored_hash in zip(entry.chunk_ids, entry.chunk_hashes, strict=True):
            snapshot.expected[chunk_id] = RowSummary(
                entry.doc_id, entry.locale, entry.scope_id, stored_hash, entry.metadata_hash
            )
        if snapshot.documents % 1000 == 0:
            progress(AuditProgress("manifest", snapshot.documents, 0))
    progress(AuditProgress("manifest", snapshot.documents, snapshot.documents))
    for name, store in ((VECTORS, storage.vectors), (LEXICAL, storage.lexical)):
        snapshot.rows[name] = _scan(name, store, progress)
    return snapshot


def _scan(
    name: str, store: VectorStore | LexicalStore, progress: ProgressFn
) -> dict[str, RowSummary]:
    total = store.count(None, unrequested_deadline())
    rows: dict[str, RowSummary] = {}
    for page in store.scan():
        rows.update((row.chunk_id, summarize(row)) for row in page)
        progress(AuditProgress(name, len(rows), total))
    return rows


def compare(snapshot: IndexSnapshot) -> list[Finding]:
    findings: list[Finding] = []
    for store, rows in snapshot.rows.items():
        findings += _unexpected(store, rows, snapshot)
        findings += _missing_or_different(store, rows, snapshot.expected)
    return findings


def _unexpected(
    store: str, rows: dict[str, RowSummary], snapshot: IndexSnapshot
) -> Iterable[Finding]:
    for chunk_id in sorted(rows.keys() - snapshot.expected.keys()):
        row = rows[chunk_id]
        kind = "uncommitted" if row.generation > snapshot.committed_generation else "orphan"
        yield Finding(kind, store, chunk_id, row.doc_id, row.locale)


def _missing_or_different(
    store: str, rows: dict[str, RowSummary], expected: dict[str, RowSummary]
) -> Iterable[Finding]:
    for chunk_id in sorted(expected):
        want, have = expected[chunk_id], rows.get(chunk_id)
        if have is None:
            yield Finding("missing", store, chunk_id, want.doc_id, want.locale)
            continue
        for name, value, actual in want.differences(have):
            yield Finding(
                "mismatch", store, chunk_id, want.doc_id, want.locale, name, value, actual
            )


def scope_counts(snapshot: IndexSnapshot) -> list[ScopeCount]:
    def tally(rows: Iterable[RowSummary]) -> Counter[tuple[str, str]]:
        return Counter((row.scope_id, row.locale) for row in rows)

    manifest = tally(snapshot.expected.values())
    vectors = tally(snapshot.rows.get(VECTORS, {}).values())
    lexical = tally(snapshot.rows.get(LEXICAL, {}).values())
    keys = sorted(manifest.keys() | vectors.keys() | lexical.keys())
    return [
        ScopeCount(s, loc, manifest[(s, loc)], vectors[(s, loc)], lexical[(s, loc)])
        for s, loc in keys
    ]
