"""Input checks for incoming documents. A bad document is rejected on its own
(INVALID_ARGUMENT-class outcome naming the field and the limit); the rest of
the batch goes on."""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.common.errors import InvalidArgument
from services.common.models import Document

# BCP 47-ish: "en", "pt-BR", "zh-Hant-TW". Anything else is an unknown locale.
_LOCALE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$")


@dataclass(frozen=True)
class DocumentLimits:
    max_doc_id_chars: int = 512
    max_document_chars: int = 2_000_000
    max_metadata_entries: int = 64
    max_metadata_value_chars: int = 1024
    allowed_locales: frozenset[str] = frozenset()  # empty: any well-formed tag


def validate_document(doc: Document, limits: DocumentLimits) -> None:
    """Raise InvalidArgument naming the offending field and the limit."""
    if not doc.doc_id.strip():
        raise InvalidArgument("doc_id: must not be empty")
    if len(doc.doc_id) > limits.max_doc_id_chars:
        raise InvalidArgument(
            f"doc_id: {len(doc.doc_id)} characters, limit is {limits.max_doc_id_chars}"
        )
    if not doc.text.strip():
        raise InvalidArgument(f"text: document {doc.doc_id!r} has an empty body")
    if len(doc.text) > limits.max_document_chars:
        raise InvalidArgument(
            f"text: {len(doc.text)} characters, limit is {limits.max_document_chars}"
        )
    _validate_locale(doc.locale, limits)
    _validate_metadata(doc.metadata, limits)
    # Text arrives already decoded (protobuf strings are valid UTF-8; the file
    # loaders decode strictly), so U+FFFD here is a real character of the
    # source, not a decoding failure. NUL is refused: it never belongs in a
    # document body and usually means binary content was sent as text.
    if "\x00" in doc.text:
        raise InvalidArgument("text: contains NUL characters")


def _validate_locale(locale: str, limits: DocumentLimits) -> None:
    if not _LOCALE.match(locale):
        raise InvalidArgument(f"locale: {locale!r} is not a language tag like 'en' or 'pt-BR'")
    if limits.allowed_locales and locale not in limits.allowed_locales:
        allowed = ", ".join(sorted(limits.allowed_locales))
        raise InvalidArgument(f"locale: {locale!r} is not one of the allowed locales ({allowed})")


def _validate_metadata(metadata: dict[str, str], limits: DocumentLimits) -> None:
    if len(metadata) > limits.max_metadata_entries:
        raise InvalidArgument(
            f"metadata: {len(metadata)} entries, limit is {limits.max_metadata_entries}"
        )
    for key, value in metadata.items():
        if not key or "=" in key:
            raise InvalidArgument(f"metadata: key {key!r} must be non-empty and contain no '='")
        if len(value) > limits.max_metadata_value_chars:
            raise InvalidArgument(
                f"metadata[{key!r}]: {len(value)} characters, "
                f"limit is {limits.max_metadata_value_chars}"
            )
