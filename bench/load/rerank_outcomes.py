"""What became of reranking in the answers of a load run, read the way the
gateway reads it (`gateway.reasons.rerank_code`, from the response's rerank
outcome):

- full: every candidate the Retriever meant to send was sent and scored;
- partial: some were scored (the head is reranked): the Reranker stopped at
  its deadline, or the Retriever sent fewer because less time was left;
- timeout: none was scored in time;
- other: reranking fell back otherwise (too little time to ask, Reranker
  unavailable, an error).

`degraded` counts the answers whose `degraded` list names the reranker: the
partial, timeout and other ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from gateway.reasons import ReasonCode, rerank_code
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

OUTCOMES = ("full", "partial", "timeout", "other")
_BY_CODE = {
    ReasonCode.RERANKED: "full",
    ReasonCode.RERANKER_PARTIAL: "partial",
    ReasonCode.RERANKER_TIMEOUT: "timeout",
}


def outcome_of(rerank: pb.RerankOutcome) -> str:
    return _BY_CODE.get(rerank_code(rerank), "other")


def outcome_shares(responses: Sequence[pb.RetrieveResponse]) -> dict[str, Any]:
    """Counts and shares (of the answers) of each outcome, and how many
    answers were degraded at the rerank step."""
    counts = Counter(outcome_of(response.rerank) for response in responses)
    answers = len(responses)
    degraded = sum(
        any(d.component == "reranker" for d in response.degraded) for response in responses
    )
    return {
        "answers": answers,
        "counts": {outcome: counts[outcome] for outcome in OUTCOMES},
        "shares": {outcome: _share(counts[outcome], answers) for outcome in OUTCOMES},
        "degraded": degraded,
    }


def _share(count: int, total: int) -> float:
    return round(count / total, 3) if total else 0.0
