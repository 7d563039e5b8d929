"""How many candidates the rerank step sends: sized to the time left from a
cost per candidate learnt from the Reranker's replies. The Reranker here is a
simulation on a fake clock (`SimulatedReranker`), so nothing depends on how
fast the machine is."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gateway.reasons import ReasonCode, rerank_code
from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded
from services.retriever.rerank_client import RerankClient, RerankReply
from services.retriever.rerank_sizing import MIN_CANDIDATES, CandidateSizer
from services.retriever.reranking import RerankCode, RerankOutcome, RerankStep
from services.retriever.types import FusedHit
from tests.retriever.factories import hit, outcome_proto
from tests.support.clock import ManualClock

pytestmark = pytest.mark.unit

QUERY = "restore from snapshots"
CONFIGURED = 20
HITS = [hit(f"c{i}", text=f"passage {i}") for i in range(30)]
BUDGET_MS, MARGIN_MS = 300, 10


class SimulatedReranker:
    """A fake Reranker client (test-only) that simulates a Reranker's cost on a
    fake clock: a call costs `wait_ms` plus `ms_per_passage` per passage, and
    like the real one it scores only what fits its timeout (partial beyond)
    or, with `times_out`, does not answer at all. It scores later passages
    higher, so reranking visibly reverses what it scored."""

    def __init__(
        self,
        clock: ManualClock,
        ms_per_passage: float,
        wait_ms: float = 0.0,
        times_out: bool = False,
    ) -> None:
        self.clock = clock
        self.ms_per_passage, self.wait_ms, self.times_out = ms_per_passage, wait_ms, times_out
        self.sent: list[int] = []

    async def rerank(self, query: str, passages: Sequence[str], timeout_s: float) -> RerankReply:
        self.sent.append(len(passages))
        if self.times_out:
            self.clock.now += timeout_s
            raise DeadlineExceeded(f"reranker did not answer within {timeout_s * 1000:.0f} ms")
        fit = int(max(timeout_s * 1000 - self.wait_ms, 0.0) // self.ms_per_passage)
        scored = min(len(passages), fit)
        self.clock.now += (self.wait_ms + scored * self.ms_per_passage) / 1000
        partial = scored < len(passages)
        return RerankReply([float(i) for i in range(scored)], partial, "deadline" * partial, "sim")


def step(reranker: SimulatedReranker, sizer: CandidateSizer | None = None) -> RerankStep:
    client: RerankClient = reranker  # type: ignore[assignment]
    return RerankStep(client, CONFIGURED, BUDGET_MS, MARGIN_MS, sizer=sizer, clock=reranker.clock)


async def rerank(
    s: RerankStep, left_ms: float = 10_000.0, hits: list[FusedHit] = HITS
) -> tuple[list[str], RerankOutcome]:
    clock = s.client.clock  # type: ignore[union-attr]  # the SimulatedReranker's
    deadline = Deadline(clock() + left_ms / 1000, clock)
    ranked, outcome = await s.run(QUERY, hits, True, deadline)
    return [h.chunk.chunk_id for h in ranked], outcome


class TestCandidateSizer:
    def test_before_any_reply_the_prior_sends_everything_with_ample_time(self) -> None:
        assert CandidateSizer().plan(20, 20, budget_s=0.29).send == 20

    def test_time_left_shrinks_the_count(self) -> None:
        sizer = CandidateSizer(prior_ms=20.0)
        sends = [sizer.plan(20, 20, budget_s=ms / 1000).send for ms in (500, 300, 100)]
        assert sends == [20, 16, 6]  # floor(budget / 20 ms), and one more

    def test_never_fewer_than_the_minimum_when_there_is_time_at_all(self) -> None:
        sizer = CandidateSizer(prior_ms=200.0)
        assert sizer.plan(20, 20, budget_s=0.01).send == MIN_CANDIDATES
        assert sizer.plan(2, 20, budget_s=0.01).send == 2  # but never more than there are

    def test_the_cost_is_reply_latency_per_candidate_scored(self) -> None:
        sizer = CandidateSizer(prior_ms=10.0, rise=1.0, fall=1.0)
        sizer.observe(sent=20, scored=5, latency_s=0.2, budget_s=0.29)
        assert sizer.ms_per_candidate == pytest.approx(40.0)
        sizer.observe(sent=20, scored=0, latency_s=0.29, budget_s=0.29)  # a timeout: halve
        assert sizer.ms_per_candidate == pytest.approx(29.0)
        sizer.observe(sent=5, scored=0, latency_s=0.002, budget_s=0.05)  # nothing fit, at once
        assert sizer.ms_per_candidate == pytest.approx(25.0)
        sizer.observe(sent=3, scored=0, latency_s=0.3, budget_s=0.3)  # the minimum: as if one
        assert sizer.ms_per_candidate == pytest.approx(300.0)

    def test_the_cost_rises_fast_and_falls_slowly(self) -> None:
        sizer = CandidateSizer(prior_ms=10.0, rise=0.5, fall=0.2)
        sizer.observe(sent=10, scored=10, latency_s=0.3, budget_s=0.3)  # 30 ms each
        assert sizer.ms_per_candidate == pytest.approx(20.0)
        sizer.observe(sent=10, scored=10, latency_s=0.0, budget_s=0.3)
        assert sizer.ms_per_candidate == pytest.approx(16.0)

    @pytest.mark.parametrize(
        "kwargs",
        [{"prior_ms": 0.0}, {"minimum": 0}, {"rise": 0.0}, {"fall": 1.5}],
    )
    def test_nonsense_is_refused(self, kwargs: dict[str, float]) -> None:
        with pytest.raises(ValueError):
            CandidateSizer(**kwargs)  # type: ignore[arg-type]


async def test_a_fast_reranker_keeps_every_candidate() -> None:
    reranker = SimulatedReranker(ManualClock(50.0), ms_per_passage=2.0, wait_ms=5.0)
    s = step(reranker)
    outcomes = [(await rerank(s))[1] for _ in range(5)]
    assert reranker.sent == [CONFIGURED] * 5
    assert all(o.code == RerankCode.RERANKED and not o.fallback for o in outcomes)
    assert outcomes[-1].reason == "" and outcomes[-1].candidates == CONFIGURED


async def test_a_slow_reranker_is_sent_what_fits_and_one_more() -> None:
    """40 ms a passage after 60 ms of waiting, 300 ms to spend: the first call
    (prior cost) sends all 20 and gets 6 back; the step then learns to send
    what fits and one more, which the Reranker leaves unscored."""
    reranker = SimulatedReranker(ManualClock(50.0), ms_per_passage=40.0, wait_ms=60.0)
    s = step(reranker)
    outcomes = [(await rerank(s))[1] for _ in range(12)]
    fits = (BUDGET_MS - 60) // 40  # 6
    assert reranker.sent[0] == CONFIGURED and outcomes[0].reranked == fits
    assert reranker.sent[-3:] == [fits + 1] * 3
    last = outcomes[-1]
    assert last.code == RerankCode.PARTIAL and (last.candidates, last.reranked) == (fits + 1, fits)
    assert last.reason.startswith("partial: 6 of 7 scored (deadline); rest in fused order; ")
    assert last.reason.endswith(f"7 of {CONFIGURED} candidates sent (~50 ms each, 300 ms left)")


async def test_less_time_left_sends_fewer_and_the_reason_says_so() -> None:
    reranker = SimulatedReranker(ManualClock(50.0), ms_per_passage=20.0)
    s = step(reranker, CandidateSizer(prior_ms=20.0))
    _, outcome = await rerank(s, left_ms=80.0)  # 70 ms budget: floor(70 / 20) + 1 = 4
    assert reranker.sent == [4]
    assert outcome.code == RerankCode.PARTIAL and outcome.used and outcome.fallback
    assert (outcome.candidates, outcome.reranked) == (4, 3)  # the one more did not fit
    assert outcome.reason == (
        "partial: 3 of 4 scored (deadline); rest in fused order; "
        "4 of 20 candidates sent (~20 ms each, 70 ms left)"
    )


async def test_sent_candidates_are_reranked_ahead_of_the_unsent_in_fused_order() -> None:
    reranker = SimulatedReranker(ManualClock(50.0), ms_per_passage=20.0)
    s = step(reranker, CandidateSizer(prior_ms=20.0))
    ranked, _ = await rerank(s, left_ms=100.0)  # 90 ms: sends c0..c4, c0..c3 are scored
    assert ranked[:4] == ["c3", "c2", "c1", "c0"]  # reranked: the simulation likes later ones
    # Then in fused order: the one sent but not scored, the unsent head, the tail.
    assert ranked[4:] == [f"c{i}" for i in range(4, 30)]


async def test_timeouts_shrink_the_next_calls_to_the_minimum() -> None:
    """Each timeout about halves the next call, down to the minimum."""
    reranker = SimulatedReranker(ManualClock(50.0), ms_per_passage=20.0, times_out=True)
    s = step(reranker)
    outcomes = [(await rerank(s))[1] for _ in range(8)]
    assert reranker.sent == [CONFIGURED, 18, 12, 8, 6, 4, MIN_CANDIDATES, MIN_CANDIDATES]
    assert outcomes[0].reason == "reranker did not answer within 300 ms"
    last = outcomes[-1]
    assert last.reason.startswith("reranker did not answer within 300 ms; 3 of 20 candidates")
    assert last.code == RerankCode.TIMEOUT and last.candidates == MIN_CANDIDATES


async def test_fewer_hits_than_configured_is_not_a_shrink() -> None:
    reranker = SimulatedReranker(ManualClock(50.0), ms_per_passage=1.0)
    _, outcome = await rerank(step(reranker), hits=HITS[:5])
    assert outcome.code == RerankCode.RERANKED and outcome.candidates == 5


@pytest.mark.parametrize("times_out", [False, True])
async def test_the_gateway_reads_the_same_code_from_a_sized_outcome(times_out: bool) -> None:
    reranker = SimulatedReranker(ManualClock(50.0), ms_per_passage=20.0, times_out=times_out)
    _, outcome = await rerank(step(reranker, CandidateSizer(prior_ms=20.0)), left_ms=100.0)
    proto = outcome_proto(outcome)
    expected = ReasonCode.RERANKER_TIMEOUT if times_out else ReasonCode.RERANKER_PARTIAL
    assert rerank_code(proto) == expected == outcome.code
