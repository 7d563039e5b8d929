"""RerankerLimit: the Retriever sends at most as many passages as the
Reranker says it takes, learns it without making a request wait, and asks
again when the Reranker refuses a call's input. The Reranker's Info is a
scripted fake here (test-only); test_rerank_service.py runs the real pair."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import grpc
import pytest
import structlog

from rag_client import CallError
from services.core.deadline import Deadline
from services.retriever.rerank_client import RerankReply, RerankUnavailable
from services.retriever.reranker_limit import RerankerLimit
from services.retriever.reranking import RerankCode, RerankStep
from tests.retriever.factories import hit

pytestmark = pytest.mark.unit

HITS = [hit(f"c{i}", text=f"passage {i}") for i in range(6)]


class ScriptedInfo:
    """Answers each question with the next of `answers` (an int, or a status
    to fail with); counts the questions (test-only)."""

    def __init__(self, *answers: int | grpc.StatusCode) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def __call__(self, timeout_s: float) -> int:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if isinstance(answer, grpc.StatusCode):
            raise CallError(answer, "scripted")
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def settle() -> None:
    """Let the background question run."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_lower_reranker_limit_caps_the_candidates_and_is_said_once() -> None:
    limit = RerankerLimit(ScriptedInfo(2), configured=4)
    with structlog.testing.capture_logs() as logs:
        await limit.learn()
        await limit.learn()
        limit.forget()  # a refusal: asked again, the same answer
        await settle()
    assert limit.candidates() == 2
    capped = [e for e in logs if e["event"] == "rerank_candidates_capped"]
    assert [(e["configured"], e["reranker_max_passages"]) for e in capped] == [(4, 2)]


@pytest.mark.parametrize("answer", [64, 4, 0], ids=["higher", "equal", "unsaid"])
async def test_a_limit_at_or_above_the_configured_number_changes_nothing(answer: int) -> None:
    limit = RerankerLimit(ScriptedInfo(answer), configured=4)
    await limit.learn()
    assert limit.candidates() == 4


async def test_an_unreachable_reranker_is_asked_again_in_the_background() -> None:
    clock, info = Clock(), ScriptedInfo(grpc.StatusCode.UNAVAILABLE, 2)
    limit = RerankerLimit(info, configured=4, retry_s=5.0, clock=clock)
    await limit.learn()  # at start-up: no answer
    assert limit.candidates() == 4 and info.asked == 1  # not due again yet
    await settle()
    clock.now += 5.0
    assert limit.candidates() == 4  # never waits: the question goes in the background
    await settle()
    assert info.asked == 2 and limit.candidates() == 2


async def test_forget_asks_again() -> None:
    info = ScriptedInfo(8, 2)
    limit = RerankerLimit(info, configured=4)
    await limit.learn()
    assert limit.candidates() == 4
    limit.forget()
    assert limit.candidates() == 4  # until the answer comes
    await settle()
    assert info.asked == 2 and limit.candidates() == 2


class CountingClient:
    """Fake Reranker client (test-only): scores what it is sent, or refuses."""

    def __init__(self, error: Exception | None = None) -> None:
        self.sent: list[int] = []
        self.error = error

    async def rerank(self, query: str, passages: Sequence[str], timeout_s: float) -> RerankReply:
        self.sent.append(len(passages))
        if self.error is not None:
            raise self.error
        return RerankReply([float(i) for i in range(len(passages))], False, "", "fake")


async def test_the_step_sends_no_more_than_the_limit_and_is_not_partial() -> None:
    client, limit = CountingClient(), RerankerLimit(ScriptedInfo(2), configured=4)
    await limit.learn()
    step = RerankStep(client, 4, 300, 10, limit=limit)  # type: ignore[arg-type]
    hits, outcome = await step.run("restore", HITS, True, Deadline.after(10.0))
    assert client.sent == [2]
    assert outcome.code == RerankCode.RERANKED and not outcome.fallback
    assert [h.chunk.chunk_id for h in hits] == ["c1", "c0", "c2", "c3", "c4", "c5"]


async def test_a_refused_input_makes_the_step_ask_the_limit_again() -> None:
    refused = RerankUnavailable(
        "reranker INVALID_ARGUMENT: passages: 4 given; at most 2", grpc.StatusCode.INVALID_ARGUMENT
    )
    info = ScriptedInfo(8, 2)
    limit = RerankerLimit(info, configured=4)
    await limit.learn()
    step = RerankStep(CountingClient(refused), 4, 300, 10, limit=limit)  # type: ignore[arg-type]
    _, outcome = await step.run("restore", HITS, True, Deadline.after(10.0))
    assert outcome.code == RerankCode.ERROR
    await settle()
    assert info.asked == 2 and limit.candidates() == 2


async def test_stop_drops_a_question_still_out() -> None:
    never = asyncio.Event()

    async def hangs(timeout_s: float) -> int:  # a Reranker that never answers (test-only)
        await never.wait()
        return 2

    limit = RerankerLimit(hangs, configured=4)
    assert limit.candidates() == 4  # the question goes out in the background
    await settle()
    await limit.stop()
    assert limit.candidates() == 4
