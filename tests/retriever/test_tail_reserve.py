"""The margin the rerank step keeps back for the rest of a request: the
configured floor on an idle run, more after requests that needed more
(under load), back down as they stop needing it, never past its cap."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.core.deadline import Deadline
from services.retriever.rerank_client import RerankClient, RerankReply
from services.retriever.reranking import RerankStep
from services.retriever.tail_reserve import CEILING_S, TailReserve
from tests.retriever.factories import hit

pytestmark = pytest.mark.unit

HITS = [hit(f"c{i}", text=f"passage {i}") for i in range(3)]


def test_the_floor_holds_until_a_request_needs_more() -> None:
    reserve = TailReserve(floor_s=0.01)
    assert reserve.margin_s() == pytest.approx(0.01)
    reserve.observe(0.004)
    assert reserve.margin_s() == pytest.approx(0.01)
    reserve.observe(0.04)
    assert reserve.margin_s() == pytest.approx(0.06)  # 40 ms needed, and half again


def test_never_more_than_a_quarter_of_the_time_left() -> None:
    reserve = TailReserve(floor_s=0.05)
    now = [0.0]
    assert reserve.margin_within(Deadline(1.0, lambda: now[0])) == pytest.approx(0.05)
    assert reserve.margin_within(Deadline(0.06, lambda: now[0])) == pytest.approx(0.015)
    assert reserve.margin_within(Deadline(-1.0, lambda: now[0])) == 0.0  # already passed
    assert reserve.margin_within(Deadline.never()) == pytest.approx(0.05)


def test_a_stall_is_forgotten_and_capped() -> None:
    reserve = TailReserve(floor_s=0.01)
    reserve.observe(5.0)
    assert reserve.margin_s() == pytest.approx(CEILING_S)
    for _ in range(80):
        reserve.observe(0.002)
    assert reserve.margin_s() == pytest.approx(0.01)


class ClockedClient:
    """Fake Reranker client (test-only): answers at once, records the timeout
    it was given."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    async def rerank(self, query: str, passages: Sequence[str], timeout_s: float) -> RerankReply:
        self.timeouts.append(timeout_s)
        return RerankReply([1.0] * len(passages), False, "", "fake")


async def test_a_slow_tail_shortens_the_next_calls_budget() -> None:
    now = [100.0]
    client = ClockedClient()
    real: RerankClient = client  # type: ignore[assignment]
    step = RerankStep(real, candidates=3, budget_ms=1000, margin_ms=10, clock=lambda: now[0])
    deadline = Deadline(100.2, lambda: now[0])
    _, outcome = await step.run("q", HITS, True, deadline)
    assert client.timeouts == [pytest.approx(0.19)]  # 200 ms left − the 10 ms floor
    now[0] += 0.08  # the rest of that request took 80 ms (a loaded machine)
    step.observe_tail(outcome)
    await step.run("q", HITS, True, Deadline(now[0] + 0.6, lambda: now[0]))
    assert client.timeouts[-1] == pytest.approx(0.6 - 0.12)  # 80 ms × 1.5 kept back
