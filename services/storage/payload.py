"""Store-neutral encodings shared by every store adapter.

Metadata is a free-form string map, but stores filter best on flat keyword
terms, so each pair becomes one `key=value` term. Keys are escaped (`%` and
`=`) so that `("a=b", "c")` and `("a", "b=c")` never produce the same term;
values need no escaping because the first `=` always ends the key.

The vector payload layout lives here too so the embedded and server Qdrant
adapters store exactly the same fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from services.core.models import Chunk, ChunkPayload, StoredChunk

METADATA_TERMS_FIELD = "meta"
GENERATION_FIELD = "generation"

_KEY_ESCAPES = {"%": "%25", "=": "%3D"}
_KEY_UNESCAPES = {escaped: raw for raw, escaped in _KEY_ESCAPES.items()}
_ESCAPE_PATTERN = re.compile("[%=]")
_UNESCAPE_PATTERN = re.compile("%25|%3D")


def metadata_term(key: str, value: str) -> str:
    """The keyword term that encodes one metadata pair."""
    escaped_key = _ESCAPE_PATTERN.sub(lambda m: _KEY_ESCAPES[m.group()], key)
    return f"{escaped_key}={value}"


def metadata_terms(metadata: Mapping[str, str]) -> list[str]:
    return [metadata_term(key, value) for key, value in sorted(metadata.items())]


def metadata_from_terms(terms: Iterable[str]) -> dict[str, str]:
    """Inverse of `metadata_terms` (terms without `=` are ignored)."""
    metadata: dict[str, str] = {}
    for term in terms:
        escaped_key, sep, value = term.partition("=")
        if sep:
            key = _UNESCAPE_PATTERN.sub(lambda m: _KEY_UNESCAPES[m.group()], escaped_key)
            metadata[key] = value
    return metadata


def payload_fields(payload: ChunkPayload) -> dict[str, Any]:
    """The payload fields a metadata-only update rewrites."""
    return {
        "url": payload.url,
        "title": payload.title,
        "heading_path": payload.heading_path,
        "scope_id": payload.scope_id,
        "locale": payload.locale,
        "metadata": dict(payload.metadata),
        METADATA_TERMS_FIELD: metadata_terms(payload.metadata),
        GENERATION_FIELD: payload.generation,
    }


def chunk_payload(chunk: Chunk) -> dict[str, Any]:
    """Compact vector payload: identity, filter fields, citation fields and the
    text (so either store can complete a search's partial hits)."""
    fields = payload_fields(payload_of_stored(chunk))
    fields.update(
        chunk_id=chunk.chunk_id,
        doc_id=chunk.doc_id,
        position=chunk.position,
        content_hash=chunk.content_hash,
        text=chunk.text,
    )
    return fields


# What a search's first phase reads of a row (two-phase fetch): enough to
# fuse, cap per document, boost and check visibility. The rest (text, title,
# url, heading path, content hash) is read once, for the hits an answer
# keeps, by `get`: a search asks for ~50 candidates per channel and returns
# ~10, and the text is most of a row's bytes.
SEARCH_FIELDS = (
    "chunk_id",
    "doc_id",
    "position",
    "scope_id",
    "locale",
    "metadata",
    GENERATION_FIELD,
)


def stored_chunk_from_payload(payload: Mapping[str, Any]) -> StoredChunk:
    """A payload as a row; without `text` (a first-phase read of
    SEARCH_FIELDS) the row is `partial`."""
    return StoredChunk(
        chunk_id=str(payload["chunk_id"]),
        doc_id=str(payload.get("doc_id", "")),
        position=int(payload.get("position", 0)),
        text=str(payload.get("text", "")),
        url=str(payload.get("url", "")),
        title=str(payload.get("title", "")),
        heading_path=str(payload.get("heading_path", "")),
        scope_id=str(payload.get("scope_id", "")),
        locale=str(payload.get("locale", "")),
        content_hash=str(payload.get("content_hash", "")),
        metadata={str(k): str(v) for k, v in (payload.get("metadata") or {}).items()},
        generation=int(payload.get(GENERATION_FIELD) or 0),
        partial="text" not in payload,
    )


def payload_of_stored(row: Chunk | StoredChunk) -> ChunkPayload:
    """A stored row's payload, generation included (what an undo writes back),
    or a chunk's (what its store rows hold)."""
    return ChunkPayload(
        url=row.url,
        title=row.title,
        heading_path=row.heading_path,
        scope_id=row.scope_id,
        locale=row.locale,
        metadata=dict(row.metadata),
        generation=row.generation,
    )


def chunk_with_payload(stored: StoredChunk, payload: ChunkPayload) -> Chunk:
    """A stored chunk with a metadata-only update applied: what a lexical
    store re-indexes (its title and heading terms depend on the payload)."""
    if stored.partial:  # a first-phase search row: writing it back would blank its text
        raise ValueError(f"chunk {stored.chunk_id}: a partial row cannot be written back")
    return Chunk(
        chunk_id=stored.chunk_id,
        doc_id=stored.doc_id,
        position=stored.position,
        text=stored.text,
        content_hash=stored.content_hash,
        **asdict(payload),  # a copy: the chunk's metadata is not the payload's
    )
