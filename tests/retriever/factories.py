"""Builders for the plain query-path values used across retriever unit tests."""

from __future__ import annotations

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.models import ScoredChunk, StoredChunk
from services.retriever.answer_proto import rerank_outcome_to_proto
from services.retriever.reranking import RerankOutcome
from services.retriever.types import Channel, ChannelRank, FusedHit


def chunk(
    chunk_id: str,
    doc_id: str | None = None,
    *,
    text: str = "",
    url: str = "",
    title: str = "",
    heading_path: str = "",
) -> StoredChunk:
    """A stored chunk; doc_id defaults to `doc-<chunk_id>` (one chunk per document)."""
    return StoredChunk(
        chunk_id=chunk_id,
        doc_id=doc_id if doc_id is not None else f"doc-{chunk_id}",
        position=0,
        text=text or f"text of {chunk_id}",
        url=url,
        title=title,
        heading_path=heading_path,
        scope_id="site",
        locale="en",
    )


def scored(chunk_id: str, score: float = 1.0, doc_id: str | None = None) -> ScoredChunk:
    return ScoredChunk(chunk(chunk_id, doc_id), score)


def ranked_list(*chunk_ids: str) -> list[ScoredChunk]:
    """A channel's result list with descending scores (only the order matters to RRF)."""
    return [scored(cid, score=float(len(chunk_ids) - i)) for i, cid in enumerate(chunk_ids)]


def hit(
    chunk_id: str,
    fused_score: float = 0.0,
    *,
    doc_id: str | None = None,
    vector: tuple[int, float] | None = None,
    lexical: tuple[int, float] | None = None,
    text: str = "",
    url: str = "",
    title: str = "",
    heading_path: str = "",
) -> FusedHit:
    """A fused hit with the given (rank, score) per channel."""
    channels = []
    if vector is not None:
        channels.append(ChannelRank(Channel.VECTOR, *vector))
    if lexical is not None:
        channels.append(ChannelRank(Channel.LEXICAL, *lexical))
    stored = chunk(chunk_id, doc_id, text=text, url=url, title=title, heading_path=heading_path)
    return FusedHit(stored, fused_score, channels)


def outcome_proto(outcome: RerankOutcome) -> rpb.RerankOutcome:
    """A rerank outcome as the Retriever answers it (the gateway reads its code)."""
    return rerank_outcome_to_proto(outcome)


def uncoded_outcome_proto(outcome: RerankOutcome) -> rpb.RerankOutcome:
    """The same outcome as a Retriever older than the `code` field sent it:
    the gateway reads its reason's fixed phrases instead."""
    sent = rerank_outcome_to_proto(outcome)
    sent.ClearField("code")
    return sent
