"""The Reranker bounds every call: one whose caller set no deadline gets the
configured default, and no call may take longer than it (probe 3: forty
calls without a deadline held the model for four minutes)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from services.contract.genproto.rag.reranker.v1 import reranker_pb2
from services.reranker.jobs import ScoreResult
from services.reranker.scorer import InputLimits
from services.reranker.servicer import RerankerServicer

pytestmark = pytest.mark.unit


class RecordingScorer:
    """Stands in for the model: records the deadline each call was given."""

    model = "stand-in"

    def __init__(self) -> None:
        self.deadlines: list[float | None] = []

    async def score_async(self, query: str, passages: list[str], deadline: float | None) -> Any:
        self.deadlines.append(deadline)
        return ScoreResult([0.0] * len(passages), len(passages), False, "", 1.0)


class Context:
    def __init__(self, remaining_s: float | None) -> None:
        self.remaining_s = remaining_s

    def time_remaining(self) -> float | None:
        return self.remaining_s

    def invocation_metadata(self) -> tuple[()]:
        return ()


@pytest.mark.parametrize(("remaining_s", "expected_s"), [(None, 2.0), (60.0, 2.0), (0.5, 0.5)])
def test_a_call_gets_the_callers_deadline_capped_at_the_default(
    remaining_s: float | None, expected_s: float
) -> None:
    scorer = RecordingScorer()
    servicer = RerankerServicer(scorer, InputLimits(), 0.0, default_deadline_ms=2000)  # type: ignore[arg-type]
    request = reranker_pb2.RerankRequest(query="q", passages=["p1", "p2"])
    started = time.monotonic()
    asyncio.run(servicer.Rerank(request, Context(remaining_s)))  # type: ignore[arg-type]
    (deadline,) = scorer.deadlines
    assert deadline is not None
    assert deadline - started == pytest.approx(expected_s, abs=0.5)
