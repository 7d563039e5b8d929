"""The Indexer's proto messages ↔ its domain values: documents in, run and
audit reports out (services.indexer.servicer uses them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.core.field_rules import canonical_language_tag
from services.core.models import ContentType, Document
from services.indexer.audit import AuditReport
from services.indexer.body import guess_content_type
from services.indexer.pipeline import IndexReport
from services.indexer.planning import DocState
from services.indexer.validation import DocumentLimits, UnreadableDocument, check_count, check_keep
from services.runtime.security.scopes import check_writable
from services.runtime.security.server_auth import current_caller

# CONTENT_TYPE_UNSPECIFIED: read from the body (`guess_content_type`).
_CONTENT_TYPES = {
    pb.CONTENT_TYPE_MARKDOWN: ContentType.MARKDOWN,
    pb.CONTENT_TYPE_HTML: ContentType.HTML,
    pb.CONTENT_TYPE_TEXT: ContentType.TEXT,
}
_STATES = {
    DocState.UNCHANGED: pb.DOCUMENT_STATE_UNCHANGED,
    DocState.METADATA_ONLY: pb.DOCUMENT_STATE_METADATA_ONLY,
    DocState.CHANGED: pb.DOCUMENT_STATE_CHANGED,
    DocState.ADDED: pb.DOCUMENT_STATE_ADDED,
    DocState.REMOVED: pb.DOCUMENT_STATE_REMOVED,
    DocState.REJECTED: pb.DOCUMENT_STATE_REJECTED,
}


def document_from_proto(msg: pb.Document, default_locale: str = "en") -> Document:
    """The domain document; one with an unknown `content_type` number becomes an
    `UnreadableDocument`, which the planner rejects on its own (REJECTED,
    INVALID_ARGUMENT) while the rest of the batch goes on."""
    fields: dict[str, Any] = {
        "doc_id": msg.doc_id,
        "text": msg.text,
        "url": msg.url,
        "title": msg.title,
        "locale": canonical_language_tag(msg.locale or default_locale),
        "scope_id": msg.scope_id,
        "metadata": dict(msg.metadata),
        "updated_at": msg.updated_at,
    }
    if msg.content_type == pb.CONTENT_TYPE_UNSPECIFIED:
        return Document(**fields, content_type=guess_content_type(msg.text))
    content_type = _CONTENT_TYPES.get(msg.content_type)
    if content_type is None:
        known = ", ".join(str(v) for v in sorted({pb.CONTENT_TYPE_UNSPECIFIED, *_CONTENT_TYPES}))
        problem = f"content_type: unknown value {msg.content_type} (known: {known})"
        return UnreadableDocument(**fields, problem=problem)
    return Document(**fields, content_type=content_type)


def keep_from_proto(
    keys: Sequence[pb.DocumentKey], limits: DocumentLimits
) -> list[tuple[str, str]]:
    """A Sync's `keep` list as (doc_id, locale) keys, bounded and checked."""
    check_count("keep", len(keys), limits.max_sync_keep, "document keys")
    keep = [(k.doc_id, canonical_language_tag(k.locale or "en")) for k in keys]
    check_keep(keep, limits)
    return keep


def writable_documents(messages: Iterable[pb.Document]) -> list[Document]:
    """The request's documents, after checking the caller may write each one's scope."""
    caller = current_caller()
    docs = [document_from_proto(m) for m in messages]
    for index, doc in enumerate(docs):
        check_writable([doc.scope_id], caller, f"documents[{index}].scope_id")
    return docs


def report_to_proto(report: IndexReport) -> pb.UpsertResponse:
    outcomes = [
        pb.DocumentOutcome(
            doc_id=p.doc_id,
            locale=p.locale,
            state=_STATES[p.state],
            chunks=len(p.entry.chunk_ids) if p.entry else 0,
            chunks_embedded=len(p.to_embed),
            chunks_deleted=len(p.to_delete),
            error_code=p.error_code,
            error=p.error,
        )
        for p in report.plans
    ]
    counts = pb.PlanCounts(**report.counts.as_dict())
    return pb.UpsertResponse(
        outcomes=outcomes,
        counts=counts,
        dry_run=report.dry_run,
        committed_generation=report.committed_generation,
    )


FINDINGS_LIMIT = 1000  # per report message; `findings_total` counts them all


def audit_report_to_proto(report: AuditReport) -> pb.VerifyReport:
    findings = [
        pb.ChunkFinding(**{k: getattr(f, k) for k in pb.ChunkFinding.DESCRIPTOR.fields_by_name})
        for f in report.findings[:FINDINGS_LIMIT]
    ]
    counts = [
        pb.ScopeCounts(**{k: getattr(c, k) for k in pb.ScopeCounts.DESCRIPTOR.fields_by_name})
        for c in report.counts
    ]
    return pb.VerifyReport(
        clean=report.clean,
        committed_generation=report.committed_generation,
        documents=report.documents,
        counts=counts,
        findings=findings,
        findings_total=len(report.findings),
        repaired=report.repaired,
        unrepairable=report.unrepairable,
        repair=report.repair,
    )
