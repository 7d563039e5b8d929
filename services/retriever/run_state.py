"""One Retrieve's values as the pipeline's steps fill them in."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from services.core.deadline import Deadline
from services.retriever.channels import ChannelOutcome, not_requested
from services.retriever.locale_balance import LocaleLists
from services.retriever.paging import PageCursor
from services.retriever.requests import PreparedQuery, RetrievalRequest
from services.retriever.reranking import RerankCode, RerankOutcome
from services.retriever.stages import StageRecorder
from services.retriever.types import Channel, FusedHit


@dataclass
class RetrievalRun:
    """One Retrieve's values as its steps fill them in."""

    request: RetrievalRequest
    prepared: PreparedQuery
    cursor: PageCursor
    deadline: Deadline
    stages: StageRecorder
    balanced: LocaleLists = field(default_factory=LocaleLists)  # locales ranked apart
    vector: ChannelOutcome = field(default_factory=lambda: not_requested(Channel.VECTOR))
    lexical: ChannelOutcome = field(default_factory=lambda: not_requested(Channel.LEXICAL))
    cross_lingual: ChannelOutcome = field(
        default_factory=lambda: not_requested(Channel.CROSS_LINGUAL)
    )
    origin: datetime = field(default_factory=lambda: datetime.now(UTC))  # of recency ages
    fused: list[FusedHit] = field(default_factory=list)  # the candidates, boosted
    rerank: RerankOutcome = field(default_factory=lambda: RerankOutcome(RerankCode.OFF))
    reranked: tuple[tuple[int, float], ...] = ()  # for the page token
    ordered: list[FusedHit] = field(default_factory=list)  # the final order
    notes: list[str] = field(default_factory=list)
