"""Stable identities: the same input gives the same ids on every run and machine."""

from __future__ import annotations

import hashlib
import json

from services.core.embedded_text import parent_titles
from services.core.models import Document


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_id(locale: str, doc_id: str, index: int) -> str:
    """Stable id of the `index`-th chunk of a document in a locale."""
    # The separator cannot occur in the JSON encoding of the parts, so
    # ("a|b", "c") and ("a", "b|c") never collide.
    return _sha256(json.dumps([locale, doc_id, index]))[:32]


def content_hash(text: str) -> str:
    """Tells whether a chunk's (or document's) text changed."""
    return _sha256(text)[:32]


def chunk_hash(heading_path: str, text: str) -> str:
    """Tells whether a chunk must be embedded again: its heading path and text,
    and for a chunk that opens with its own heading under parent titles, that
    those titles are embedded before it (services.core.embedded_text, since
    struct-v4): an index written before embeds exactly those chunks again."""
    key = heading_path + "\n" + text
    return content_hash("parents\n" + key if parent_titles(heading_path, text) else key)


def metadata_hash(doc: Document) -> str:
    """Hash of everything but the body: a change here alone is metadata-only."""
    fields = {
        "url": doc.url,
        "title": doc.title,
        "scope_id": doc.scope_id,
        "metadata": sorted(doc.metadata.items()),
    }
    return _sha256(json.dumps(fields, sort_keys=True))[:32]
