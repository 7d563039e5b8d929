"""Plain data types shared by the services (no gRPC, no store specifics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ContentType(StrEnum):
    MARKDOWN = "markdown"
    HTML = "html"
    TEXT = "text"


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    url: str = ""
    title: str = ""
    locale: str = "en"
    scope_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    content_type: ContentType = ContentType.MARKDOWN
    updated_at: str = ""


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit. `chunk_id` is stable for (locale, doc_id, position)."""

    chunk_id: str
    doc_id: str
    position: int
    text: str
    content_hash: str
    url: str = ""
    title: str = ""
    heading_path: str = ""
    scope_id: str = ""
    locale: str = "en"
    metadata: dict[str, str] = field(default_factory=dict)
    # The indexing run that wrote this row (services.storage.visibility).
    generation: int = 0


@dataclass(frozen=True)
class ChunkPayload:
    """Everything about a chunk except its text: what a metadata-only update rewrites."""

    url: str
    title: str
    heading_path: str
    scope_id: str
    locale: str
    metadata: dict[str, str]
    generation: int = 0


@dataclass(frozen=True)
class ScopeFilter:
    """Filters applied identically by every store. Empty fields do not filter."""

    scope_id: str = ""
    locale: str = ""
    # Any of these scopes (a reader granted several, searching them at once);
    # with scope_id set as well, both hold.
    scope_ids: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    # Rows written by a later, uncommitted run are excluded; None: no limit
    # (the Indexer's own reads, audits).
    visible_generation: int | None = None

    def is_empty(self) -> bool:
        return not (
            self.scope_id
            or self.scope_ids
            or self.locale
            or self.doc_ids
            or self.urls
            or self.metadata
            or self.visible_generation is not None
        )


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as read back from a store (search hit or lookup).

    `partial`: only the fields a search's first phase reads were read
    (`services.storage.payload.SEARCH_FIELDS`: identity, filter and
    boost fields); text, title, url, heading path and content hash are empty
    until the row is read whole with the store's `get`. A lookup or a scan
    always reads whole rows."""

    chunk_id: str
    doc_id: str
    position: int
    text: str
    url: str
    title: str
    heading_path: str
    scope_id: str
    locale: str
    content_hash: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    generation: int = 0
    partial: bool = False


@dataclass(frozen=True)
class ScoredChunk:
    """A store's search result: the chunk and that store's own score.
    `exact`: the query's identifiers the chunk contains (lexical stores)."""

    chunk: StoredChunk
    score: float
    exact: tuple[str, ...] = ()
