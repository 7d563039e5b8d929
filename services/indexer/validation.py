"""Input checks for incoming documents. A bad document is rejected on its own
(INVALID_ARGUMENT-class outcome naming the field and the limit); the rest of
the batch goes on. A request as a whole (its size, a Delete's ids, a Sync's
scope and keep list) is checked by `check_*` below before any work is done."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from services.core.errors import EmptyDocument, InvalidArgument
from services.core.field_rules import (
    CONTROL_CHARACTERS,
    MAX_METADATA_VALUE_CHARS,
    canonical_language_tag,
    hidden_character_problem,
    language_tag_problem,
    scope_id_problem,
)
from services.core.models import Document
from services.core.query_text import shows_nothing
from services.indexer.document_fields import check_timestamp, check_web_url

# Control characters (C0, DEL, C1: NUL, newline, escape, ...) and the Unicode
# line and paragraph separators: they never belong in an id, a URL or a key.
_PREVIEW_CHARS = 40


@dataclass(frozen=True)
class DocumentLimits:
    max_doc_id_chars: int = 512
    max_document_chars: int = 2_000_000
    max_chunking_steps: int = 10_000  # chunking steps (services.indexer.work_budget)
    max_metadata_entries: int = 64
    max_metadata_value_chars: int = MAX_METADATA_VALUE_CHARS
    max_metadata_key_chars: int = 128
    max_title_chars: int = 1000
    max_url_chars: int = 2048
    max_scope_id_chars: int = 128
    allowed_locales: frozenset[str] = frozenset()  # empty: any well-formed tag
    # Per request (checked by the servicer before any work).
    max_batch_documents: int = 1000
    max_delete_ids: int = 10_000
    max_sync_keep: int = 1_000_000

    @classmethod
    def from_settings(cls, settings: Any) -> DocumentLimits:
        """From IndexerSettings: every limit of the same name, and the
        comma-separated `allowed_locales`."""
        values = {
            f.name: getattr(settings, f.name) for f in fields(cls) if hasattr(settings, f.name)
        }
        values["allowed_locales"] = frozenset(
            canonical_language_tag(x.strip())
            for x in str(settings.allowed_locales).split(",")
            if x.strip()
        )
        return cls(**values)


@dataclass(frozen=True)
class UnreadableDocument(Document):
    """A document whose request could not be turned into a `Document` (e.g.
    an unknown enum number): `validate_document` rejects it with `problem`."""

    problem: str = ""


def preview(value: str) -> str:
    """`value` quoted, cut short enough to go into an error message."""
    if len(value) <= _PREVIEW_CHARS:
        return repr(value)
    return repr(value[:_PREVIEW_CHARS]) + "..."


def validate_document(doc: Document, limits: DocumentLimits) -> None:
    """Raise InvalidArgument naming the offending field and the limit."""
    if isinstance(doc, UnreadableDocument):
        raise InvalidArgument(doc.problem)
    check_doc_id("doc_id", doc.doc_id, limits)
    check_new_doc_id("doc_id", doc.doc_id)
    check_scope_id("scope_id", doc.scope_id, limits)
    if shows_nothing(doc.text):  # a zero-width space alone is an empty page
        raise EmptyDocument(
            f"text: document {doc.doc_id!r} has an empty body (white space and "
            "invisible format characters only)"
        )
    if len(doc.text) > limits.max_document_chars:
        raise InvalidArgument(
            f"text: {len(doc.text)} characters, limit is {limits.max_document_chars}"
        )
    _check_length("title", doc.title, limits.max_title_chars)
    # A title is one line of plain text, kept as written: `<script>` in a
    # title is seven characters, shown as such by every reader (JSON, the
    # evidence text, the web page's `textContent`). Tags are not stripped:
    # a stripper would corrupt real titles ("Vec<T> in Rust", "The <dialog>
    # element") and protect nothing, since escaping is the renderer's job.
    # Control and format characters are refused instead (one-line text,
    # services.core.field_rules): they never belong in one line, can forge
    # lines in logs and terminals, and bidi overrides make a title read as
    # another ("abc\u202etxt.exe" shows as "abcexe.txt").
    check_one_line("title", doc.title)
    _check_length("url", doc.url, limits.max_url_chars)
    if CONTROL_CHARACTERS.search(doc.url):
        raise InvalidArgument("url: must not contain control characters (NUL, newline, ...)")
    check_web_url("url", doc.url)
    check_timestamp("updated_at", doc.updated_at)
    _validate_locale(doc.locale, limits)
    _validate_metadata(doc.metadata, limits)
    # Text arrives already decoded (protobuf strings are valid UTF-8; the file
    # loaders decode strictly), so U+FFFD here is a real character of the
    # source, not a decoding failure. NUL is refused: it never belongs in a
    # document body and usually means binary content was sent as text.
    if "\x00" in doc.text:
        raise InvalidArgument("text: contains NUL characters")


def check_doc_id(field: str, doc_id: str, limits: DocumentLimits) -> None:
    if not doc_id.strip():
        raise InvalidArgument(f"{field}: must not be empty")
    _check_length(field, doc_id, limits.max_doc_id_chars)


def check_new_doc_id(field: str, doc_id: str) -> None:
    """An id a new document may take: one-line text (no control, bidi or
    zero-width character: an id is shown in citations and compared byte for
    byte, and "a\u202eb" or "a\u200bb" read as other ids) and no white space
    at either end (" guide" and "guide" look alike and are two documents).
    Delete and Sync check only the length (`check_doc_id`): ids indexed
    before this rule stay deletable."""
    check_one_line(field, doc_id)
    if doc_id != doc_id.strip():
        raise InvalidArgument(f"{field}: {preview(doc_id)} begins or ends with white space")


def check_scope_id(field: str, scope_id: str, limits: DocumentLimits) -> None:
    """Every document belongs to a scope (tenant, site or collection)."""
    if not scope_id:
        raise InvalidArgument(f"{field}: must not be empty (the tenant, site or collection)")
    _check_length(field, scope_id, limits.max_scope_id_chars)
    if scope_id_problem(scope_id) is not None:
        raise InvalidArgument(
            f"{field}: {preview(scope_id)} may hold only letters, digits and . _ - : /"
        )


def check_locale_tag(field: str, locale: str) -> None:
    """A well-formed BCP 47 tag, primary subtag in lower case (field_rules)."""
    problem = language_tag_problem(locale)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def check_one_line(field: str, value: str, line_breaks: bool = False) -> None:
    """No control or format character (field_rules' one-line text; with
    `line_breaks`, a metadata value's: tab and line breaks allowed)."""
    problem = hidden_character_problem(value, line_breaks=line_breaks)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def check_count(field: str, count: int, limit: int, unit: str) -> None:
    """A request's list is bounded (checked before anything is done with it)."""
    if count > limit:
        raise InvalidArgument(f"{field}: {count} {unit} in one request, limit is {limit}")


def check_batch_size(field: str, count: int, limits: DocumentLimits) -> None:
    check_count(field, count, limits.max_batch_documents, "documents")


def delete_ids(doc_ids: Sequence[str], locale: str, limits: DocumentLimits) -> list[str]:
    """A Delete's ids, each once (first occurrence order), bounded. Ids are
    not checked for characters: documents indexed before that check must
    stay deletable."""
    if not doc_ids:
        raise InvalidArgument("doc_ids: at least one document id is required")
    check_count("doc_ids", len(doc_ids), limits.max_delete_ids, "ids")
    for index, doc_id in enumerate(doc_ids):
        check_doc_id(f"doc_ids[{index}]", doc_id, limits)
    if locale:
        check_locale_tag("locale", locale)
    return list(dict.fromkeys(doc_ids))


def check_keep(keep: Sequence[tuple[str, str]], limits: DocumentLimits) -> None:
    """A Sync's `keep` list: bounded, ids no longer than an id can be, and
    locales that are language tags."""
    check_count("keep", len(keep), limits.max_sync_keep, "document keys")
    for index, (doc_id, locale) in enumerate(keep):
        check_doc_id(f"keep[{index}].doc_id", doc_id, limits)
        check_locale_tag(f"keep[{index}].locale", locale)


def _check_length(field: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{field}: {len(value)} characters, limit is {limit}")


def _validate_locale(locale: str, limits: DocumentLimits) -> None:
    check_locale_tag("locale", locale)
    if limits.allowed_locales and locale not in limits.allowed_locales:
        allowed = ", ".join(sorted(limits.allowed_locales))
        raise InvalidArgument(f"locale: {locale!r} is not one of the allowed locales ({allowed})")


def _validate_metadata(metadata: dict[str, str], limits: DocumentLimits) -> None:
    if len(metadata) > limits.max_metadata_entries:
        raise InvalidArgument(
            f"metadata: {len(metadata)} entries, limit is {limits.max_metadata_entries}"
        )
    for key, value in metadata.items():
        if len(key) > limits.max_metadata_key_chars:
            raise InvalidArgument(
                f"metadata: key {preview(key)} has {len(key)} characters, "
                f"limit is {limits.max_metadata_key_chars}"
            )
        if not key.strip() or "=" in key or CONTROL_CHARACTERS.search(key):
            raise InvalidArgument(
                f"metadata: key {key!r} must be non-empty and contain no '=' "
                "and no control characters"
            )
        check_one_line(f"metadata: key {preview(key)}", key)
        if len(value) > limits.max_metadata_value_chars:
            raise InvalidArgument(
                f"metadata[{key!r}]: {len(value)} characters, "
                f"limit is {limits.max_metadata_value_chars}"
            )
        check_one_line(f"metadata[{key!r}]", value, line_breaks=True)
