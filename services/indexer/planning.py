"""Turn incoming documents into a plan: one of the five states per document,
with the exact chunks to embed and the rows to write, update and delete.

A plan is computed the same way for a dry run and a real run, so a dry run's
counts are the real run's counts. Planning looks at the run's deadline and
cancellation before each document and, through the chunker's `WorkMeter`,
inside it; a document that needs more chunking work than
`max_chunking_steps` is rejected by name and the rest goes on.

Not every span the chunker cuts is stored: one without a single letter or
digit (a thematic break, a table's `| --- |` row, leftovers of markup) can
match no query word and its vector is noise, which once ranked first for an
unrelated query. `indexable_spans` drops those here rather than in the
chunker, whose spans must cover the input exactly; chunk positions count
the spans kept, so a document's chunk ids stay consecutive.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from services.core.deadline import Deadline
from services.core.errors import EmptyDocument, InvalidArgument
from services.core.models import Chunk, ChunkPayload, Document
from services.core.query_text import holds_content
from services.indexer.body import body_syntax, normalize_body
from services.indexer.chunking import Chunker, TextSpan, TextSyntax
from services.indexer.identity import chunk_hash, chunk_id, content_hash, metadata_hash
from services.indexer.validation import DocumentLimits, validate_document
from services.indexer.work_budget import WorkMeter
from services.runtime.security.callers import ScopeGrant
from services.storage.manifest import Manifest, ManifestEntry

RunCheck = Callable[[], None]  # raises when the run must stop (RunControl.check)


class DocState(StrEnum):
    UNCHANGED = "unchanged"
    METADATA_ONLY = "metadata_only"
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"
    REJECTED = "rejected"


@dataclass
class DocumentPlan:
    doc_id: str
    locale: str
    state: DocState
    chunks: list[Chunk] = field(default_factory=list)  # full new version
    to_embed: list[Chunk] = field(default_factory=list)  # new text → vectors + rows
    payload_updates: list[tuple[str, ChunkPayload]] = field(default_factory=list)
    to_delete: list[str] = field(default_factory=list)
    entry: ManifestEntry | None = None  # what the manifest holds after the run
    # The committed entry the plan was made against (None: none), as the
    # planner read it: the run's intents record it without reading it again.
    old: ManifestEntry | None = None
    error: str = ""
    error_code: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.doc_id, self.locale)

    @property
    def writes(self) -> bool:
        return bool(self.to_embed or self.payload_updates or self.to_delete)


@dataclass(frozen=True)
class PlanCounts:
    unchanged: int = 0
    metadata_only: int = 0
    changed: int = 0
    added: int = 0
    removed: int = 0
    rejected: int = 0
    chunks_to_embed: int = 0
    vectors_to_upsert: int = 0
    vectors_to_delete: int = 0
    rows_to_upsert: int = 0
    rows_to_delete: int = 0
    payload_updates: int = 0

    @staticmethod
    def of(plans: Sequence[DocumentPlan]) -> PlanCounts:
        states = [p.state for p in plans]
        embed = sum(len(p.to_embed) for p in plans)
        delete = sum(len(p.to_delete) for p in plans)
        return PlanCounts(
            unchanged=states.count(DocState.UNCHANGED),
            metadata_only=states.count(DocState.METADATA_ONLY),
            changed=states.count(DocState.CHANGED),
            added=states.count(DocState.ADDED),
            removed=states.count(DocState.REMOVED),
            rejected=states.count(DocState.REJECTED),
            chunks_to_embed=embed,
            vectors_to_upsert=embed,
            rows_to_upsert=embed,
            vectors_to_delete=delete,
            rows_to_delete=delete,
            payload_updates=sum(len(p.payload_updates) for p in plans),
        )

    def __add__(self, other: PlanCounts) -> PlanCounts:
        return PlanCounts(**{k: getattr(self, k) + getattr(other, k) for k in _COUNT_FIELDS})

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in _COUNT_FIELDS}


_COUNT_FIELDS = list(PlanCounts.__dataclass_fields__)


def payload_of(doc: Document, heading_path: str) -> ChunkPayload:
    return ChunkPayload(
        url=doc.url,
        title=doc.title,
        heading_path=heading_path,
        scope_id=doc.scope_id,
        locale=doc.locale,
        metadata=dict(doc.metadata),
    )


class Planner:
    """Decides each document's state against the manifest (reads only)."""

    def __init__(
        self,
        chunker: Chunker,
        manifest: Manifest,
        limits: DocumentLimits,
        *,
        clean_markdown: bool = True,
    ) -> None:
        self.chunker = chunker
        self.manifest = manifest
        self.limits = limits
        # No need to key hashes on this switch: the content hash is taken of
        # the cleaned body, so flipping it re-chunks exactly the documents
        # whose cleaned text differs from their text as written.
        self.clean_markdown = clean_markdown
        # Chunking parameters are part of every document's content hash, so a
        # change of parameters re-chunks everything instead of mixing builds.
        self._params_key = json.dumps(chunker.params.as_dict(), sort_keys=True)

    def plan_upserts(
        self, docs: Sequence[Document], check: RunCheck | None = None, *, deadline: Deadline
    ) -> list[DocumentPlan]:
        """One plan per input document, in input order; `check` is called
        before each document and every few chunking steps inside one;
        `deadline` bounds the manifest read (the run's)."""
        plans, accepted = self._validate(docs)
        keys = [(d.doc_id, d.locale) for _, d in accepted]
        existing = self.manifest.get_many(keys, deadline)
        for index, doc in accepted:
            if check is not None:
                check()
            old = existing.get((doc.doc_id, doc.locale))
            if old is not None and old.scope_id != doc.scope_id:
                plans[index] = _owned_elsewhere(doc)
                continue
            try:
                plans[index] = replace(self._plan_one(doc, old, self._meter(doc, check)), old=old)
            except InvalidArgument as exc:  # over its work budget, or nothing to index
                plans[index] = _rejected(doc, exc)
        return plans

    def _meter(self, doc: Document, check: RunCheck | None) -> WorkMeter:
        return WorkMeter(
            limit=self.limits.max_chunking_steps,
            check=check,
            what=f"doc_id {doc.doc_id!r} (locale {doc.locale!r})",
        )

    def plan_removals(
        self,
        keys: Sequence[tuple[str, str]],
        scopes: ScopeGrant | None = None,
        *,
        deadline: Deadline,
    ) -> list[DocumentPlan]:
        """Removal plans, in the order of `keys`.

        A key the caller cannot remove (no such document, or one in a scope
        outside `scopes`) is not indexed as far as the caller may tell, so the
        answer must not depend on which it is: a doc_id with removable keys
        gets exactly those, and one with none gets a single `_not_indexed`
        plan that names nothing but the doc_id. Neither the answer's words nor
        the number of its outcomes then tell a missing document from one in
        another scope, whatever locales the latter has (a Delete without a
        locale expands a doc_id into every locale indexed under it, in any
        scope: `IndexingPipeline.delete`)."""
        existing = self.manifest.get_many(keys, deadline)
        removable = {
            key: entry
            for key, entry in existing.items()
            if scopes is None or scopes.allows(entry.scope_id)
        }
        answered = {doc_id for doc_id, _ in removable}
        plans: list[DocumentPlan] = []
        for doc_id, locale in keys:
            entry = removable.get((doc_id, locale))
            if entry is not None:
                to_delete = sorted(entry.chunk_ids)
                plans.append(
                    DocumentPlan(doc_id, locale, DocState.REMOVED, to_delete=to_delete, old=entry)
                )
            elif doc_id not in answered:
                answered.add(doc_id)
                plans.append(_not_indexed(doc_id))
        return plans

    def _validate(
        self, docs: Sequence[Document]
    ) -> tuple[list[DocumentPlan], list[tuple[int, Document]]]:
        """Rejected documents get their final plan here; accepted ones a
        placeholder that `plan_upserts` replaces."""
        plans: list[DocumentPlan] = []
        accepted: list[tuple[int, Document]] = []
        seen: set[tuple[str, str]] = set()
        for index, doc in enumerate(docs):
            try:
                validate_document(doc, self.limits)
                if (doc.doc_id, doc.locale) in seen:
                    raise InvalidArgument(f"doc_id: {doc.doc_id!r} appears twice in the batch")
            except InvalidArgument as exc:
                plans.append(_rejected(doc, exc))
                continue
            seen.add((doc.doc_id, doc.locale))
            plans.append(_rejected(doc, InvalidArgument("placeholder")))
            accepted.append((index, doc))
        return plans, accepted

    def _plan_one(self, doc: Document, old: ManifestEntry | None, meter: WorkMeter) -> DocumentPlan:
        body = normalize_body(doc, clean=self.clean_markdown)
        doc_hash = content_hash(self._params_key + "\x00" + body)
        meta_hash = metadata_hash(doc)
        if old and old.content_hash == doc_hash:
            if old.metadata_hash == meta_hash:
                return DocumentPlan(doc.doc_id, doc.locale, DocState.UNCHANGED, entry=old)
            spans = indexable_spans(self.chunker, body, meter, body_syntax(doc))
            # Unequal counts: the stored chunks were cut before markup-only
            # spans were dropped, so the document is re-chunked instead.
            if len(spans) == len(old.chunk_ids):
                return self._metadata_only(doc, old, meta_hash, spans)
        chunks = document_chunks(self.chunker, doc, body, meter=meter)
        if not chunks:
            # Acknowledged, it would count as indexed yet be found by nothing
            # (the page itself reads "not indexed"): refused, as an empty body is.
            raise EmptyDocument(
                f"text: document {doc.doc_id!r} has nothing to index once read as "
                f"{doc.content_type.value} (markup, comments, front matter, scripts, "
                "styles or punctuation only)"
            )
        entry = ManifestEntry(
            doc.doc_id,
            doc.locale,
            doc.scope_id,
            doc_hash,
            meta_hash,
            tuple(c.chunk_id for c in chunks),
            tuple(c.content_hash for c in chunks),
            doc.updated_at,
        )
        state = DocState.CHANGED if old else DocState.ADDED
        plan = DocumentPlan(doc.doc_id, doc.locale, state, chunks=chunks, entry=entry)
        self._diff(plan, doc, old, meta_hash)
        return plan

    def _diff(
        self,
        plan: DocumentPlan,
        doc: Document,
        old: ManifestEntry | None,
        meta_hash: str,
    ) -> None:
        """Only chunks whose text changed are re-embedded; unchanged chunks
        get a payload update when the metadata changed too."""
        old_hashes = dict(zip(old.chunk_ids, old.chunk_hashes, strict=True)) if old else {}
        metadata_changed = old is not None and old.metadata_hash != meta_hash
        for chunk in plan.chunks:
            same_text = old_hashes.get(chunk.chunk_id) == chunk.content_hash
            if not same_text:
                plan.to_embed.append(chunk)
            elif metadata_changed:
                plan.payload_updates.append((chunk.chunk_id, payload_of(doc, chunk.heading_path)))
        new_ids = {c.chunk_id for c in plan.chunks}
        plan.to_delete = sorted(set(old_hashes) - new_ids)

    def _metadata_only(
        self, doc: Document, old: ManifestEntry, meta_hash: str, spans: list[TextSpan]
    ) -> DocumentPlan:
        # Heading paths live in the chunk hash's input, not here; re-chunking is
        # not needed because the body is byte-identical.
        updates = [
            (cid, payload_of(doc, span.heading_path))
            for cid, span in zip(old.chunk_ids, spans, strict=True)
        ]
        entry = ManifestEntry(
            doc.doc_id,
            doc.locale,
            doc.scope_id,
            old.content_hash,
            meta_hash,
            old.chunk_ids,
            old.chunk_hashes,
            doc.updated_at,
        )
        return DocumentPlan(
            doc.doc_id, doc.locale, DocState.METADATA_ONLY, payload_updates=updates, entry=entry
        )


def indexable_spans(
    chunker: Chunker,
    body: str,
    meter: WorkMeter | None = None,
    syntax: TextSyntax = TextSyntax.MARKDOWN,
) -> list[TextSpan]:
    """The chunker's spans that hold a letter or digit (any script) or a
    symbol beyond ASCII (`holds_content`: a section of status emoji or of
    ∀ ∈ → is content a symbol query can look for; a table rule is not); a
    heading-only span keeps its words and stays."""
    spans = chunker.split(body, meter, syntax)
    return [span for span in spans if holds_content(span.text)]


def document_chunks(
    chunker: Chunker,
    doc: Document,
    body: str | None = None,
    *,
    clean: bool = True,
    meter: WorkMeter | None = None,
) -> list[Chunk]:
    """The chunks the Indexer stores for `doc` (`body`: its normalised text,
    when the caller has it already; `clean`: as the Indexer's
    RAG_CLEAN_MARKDOWN, used when it has not; `meter`: see work_budget)."""
    text = normalize_body(doc, clean=clean) if body is None else body
    spans = indexable_spans(chunker, text, meter, body_syntax(doc))
    return [
        Chunk(
            chunk_id=chunk_id(doc.locale, doc.doc_id, index),
            doc_id=doc.doc_id,
            position=index,
            text=span.text,
            content_hash=chunk_hash(span.heading_path, span.text),
            url=doc.url,
            title=doc.title,
            heading_path=span.heading_path,
            scope_id=doc.scope_id,
            locale=doc.locale,
            metadata=dict(doc.metadata),
        )
        for index, span in enumerate(spans)
    ]


def _owned_elsewhere(doc: Document) -> DocumentPlan:
    """A document's identity is (doc_id, locale) across every scope: the same
    pair upserted into another scope would move or overwrite a document that
    belongs to someone else, so it is refused (docs/security.md)."""
    return DocumentPlan(
        doc.doc_id,
        doc.locale,
        DocState.REJECTED,
        error_code="ALREADY_EXISTS",
        error=f"doc_id {doc.doc_id!r} (locale {doc.locale!r}) is already indexed in another "
        "scope; a document moves between scopes by deleting it first",
    )


def _not_indexed(doc_id: str) -> DocumentPlan:
    """A removal the caller cannot make, in words that are the same whether
    the document is missing or belongs to a scope the caller does not hold
    (docs/security.md): no locale (the one looked up would be the other
    scope's), no scope, no counts."""
    return DocumentPlan(
        doc_id,
        "",
        DocState.REJECTED,
        error_code="NOT_FOUND",
        error=f"doc_id {doc_id!r} is not indexed",
    )


def _rejected(doc: Document, error: InvalidArgument) -> DocumentPlan:
    code = EmptyDocument.code if isinstance(error, EmptyDocument) else "INVALID_ARGUMENT"
    return DocumentPlan(
        doc.doc_id, doc.locale, DocState.REJECTED, error=str(error), error_code=code
    )
