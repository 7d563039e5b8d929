"""Typed values flowing through the query path (no gRPC here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from services.core.analysis import MatchSpan
from services.core.models import StoredChunk


class Channel(StrEnum):
    VECTOR = "vector"
    LEXICAL = "lexical"
    # The chunks' second vector (RAG_CROSS_LINGUAL_MODEL): searched only where
    # the index has one; fused like the others.
    CROSS_LINGUAL = "cross_lingual"


# The two channels every index has (a "hybrid" request asks for both).
HYBRID = frozenset({Channel.VECTOR, Channel.LEXICAL})


class Intent(StrEnum):
    SITE_SEARCH = "site_search"
    CURRENT_PAGE = "current_page"


@dataclass(frozen=True)
class ChannelRank:
    """Where one channel ranked a chunk (rank is 1-based) and its own score."""

    channel: Channel
    rank: int
    score: float
    contribution: float = 0.0  # what this channel added to the hit's fused score


@dataclass
class FusedHit:
    chunk: StoredChunk
    fused_score: float
    channels: list[ChannelRank] = field(default_factory=list)
    rerank_score: float | None = None
    exact: tuple[str, ...] = ()  # the query's identifiers this hit holds
    highlights: list[MatchSpan] = field(default_factory=list)  # in chunk.text
    group: int = 0  # its document's rank among the groups (0: not grouping)
    boost: float = 1.0  # multiplier on fused_score from the request's boosts
    boost_reasons: tuple[str, ...] = ()  # one line per boost that applied

    @property
    def page(self) -> tuple[str, str]:
        """The page the hit is a chunk of, as the per-document cap and grouped
        pages count: (scope_id, doc_id). One doc_id in two locales of a scope
        is one page in two languages; in two scopes, two pages (the Indexer
        keys a document by doc_id and locale, so two scopes may each hold
        `index.html` in their own)."""
        return (self.chunk.scope_id, self.chunk.doc_id)

    @property
    def reranked(self) -> bool:
        return self.rerank_score is not None

    def rank_in(self, channel: Channel) -> ChannelRank | None:
        return next((c for c in self.channels if c.channel is channel), None)


@dataclass(frozen=True)
class Citation:
    number: int
    chunk_id: str
    doc_id: str
    url: str
    title: str
    heading_path: str


@dataclass(frozen=True)
class Evidence:
    text: str
    citations: list[Citation]
    chars: int
    dropped_chunks: int
    truncated: bool
