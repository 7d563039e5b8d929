"""The values one Retrieve's steps hand on: each step takes what it needs
and returns what it made (services.retriever.pipeline)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.core.deadline import Deadline
from services.retriever.locale_balance import LocaleLists
from services.retriever.paging import PageCursor
from services.retriever.requests import PreparedQuery, RetrievalRequest
from services.retriever.reranking import RerankOutcome
from services.retriever.types import FusedHit


@dataclass(frozen=True)
class RetrievalRun:
    """One Retrieve as its steps read it: what was asked, the request
    prepared (its scope at the committed generation), where its page
    starts, and by when. (The stage timer is the pipeline's, held apart:
    it times the steps from outside.)"""

    request: RetrievalRequest
    prepared: PreparedQuery
    cursor: PageCursor
    deadline: Deadline


@dataclass(frozen=True)
class Candidates:
    """Fusion's and the boosts' product."""

    fused: list[FusedHit]  # the candidates, boosted
    origin: datetime  # when recency ages count from
    locales: LocaleLists  # the locales ranked apart, with the order they took turns in
    weight_note: str  # "" or (debug) the question weight that set the vector channel's
    note: str  # "" or what the boosts could not do


@dataclass(frozen=True)
class Ordering:
    """The rerank and diversity steps' product."""

    candidates: list[FusedHit]  # as fused, the Reranker's head with whole rows
    reranked: list[FusedHit]  # the rerank step's order (the page token keeps its scores)
    ordered: list[FusedHit]  # the final order
    rerank: RerankOutcome
    precedence_note: str  # "" or what exact-identifier precedence did
    note: str  # "" or what diversity did
