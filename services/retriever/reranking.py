"""The rerank step: send the top fused candidates to the Reranker with a
deadline of min(budget, time left − margin); keep the fused order for
whatever was not scored in time, and say what happened."""

from __future__ import annotations

import time
from dataclasses import dataclass

from services.common.errors import DeadlineExceeded, Unavailable
from services.retriever.channels import remaining_s
from services.retriever.fusion import merge_rerank
from services.retriever.rerank_client import RerankClient
from services.retriever.types import FusedHit

# Below this there is no point in asking: a round trip alone takes longer.
MIN_USEFUL_BUDGET_S = 0.005


@dataclass
class RerankOutcome:
    used: bool = False  # the final order reflects reranking
    fallback: bool = False  # fused order kept, in whole or in part
    requested: bool = False  # reranking was wanted and possible
    reason: str = ""
    candidates: int = 0
    reranked: int = 0
    model: str = ""
    latency_ms: float = 0.0


def passage_text(hit: FusedHit) -> str:
    chunk = hit.chunk
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


class RerankStep:
    def __init__(
        self, client: RerankClient | None, candidates: int, budget_ms: int, margin_ms: int
    ) -> None:
        self.client = client
        self.candidates = candidates
        self.budget_s = budget_ms / 1000
        self.margin_s = margin_ms / 1000

    async def run(
        self, query: str, fused: list[FusedHit], enabled: bool, deadline: float
    ) -> tuple[list[FusedHit], RerankOutcome]:
        if not enabled:
            return fused, RerankOutcome(reason="disabled by request")
        if self.client is None:
            return fused, RerankOutcome(reason="no reranker configured")
        if not fused:
            return fused, RerankOutcome(reason="no candidates")
        head, tail = fused[: self.candidates], fused[self.candidates :]
        outcome = RerankOutcome(requested=True, candidates=len(head))
        budget = min(self.budget_s, remaining_s(deadline) - self.margin_s)
        if budget < MIN_USEFUL_BUDGET_S:
            outcome.fallback = True
            outcome.reason = f"deadline too short to rerank ({max(budget, 0) * 1000:.0f} ms left)"
            return fused, outcome
        return await self._call(query, head, tail, budget, outcome)

    async def _call(
        self,
        query: str,
        head: list[FusedHit],
        tail: list[FusedHit],
        budget: float,
        outcome: RerankOutcome,
    ) -> tuple[list[FusedHit], RerankOutcome]:
        assert self.client is not None
        started = time.perf_counter()
        try:
            reply = await self.client.rerank(query, [passage_text(h) for h in head], budget)
        except (DeadlineExceeded, Unavailable) as exc:
            outcome.latency_ms = (time.perf_counter() - started) * 1000
            outcome.fallback = True
            outcome.reason = str(exc)
            return head + tail, outcome
        outcome.latency_ms = (time.perf_counter() - started) * 1000
        outcome.model = reply.model
        scores = reply.scores[: len(head)]
        try:
            merged = merge_rerank(head, scores)
        except ValueError as exc:  # e.g. NaN scores: never fail a Retrieve over it
            outcome.fallback = True
            outcome.reason = f"unusable reranker reply: {exc}"
            return head + tail, outcome
        outcome.reranked = len(scores)
        outcome.used = bool(scores)
        if reply.partial or len(scores) < len(head):
            outcome.fallback = True
            outcome.reason = (
                f"partial: {len(scores)} of {len(head)} scored "
                f"({reply.stop_reason or 'stopped early'}); rest in fused order"
            )
        return merged + tail, outcome
