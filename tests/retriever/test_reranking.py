"""RerankStep: which outcome (and stable code) each situation gives, the
Deadline it budgets from, and what it tells the health tracker. The Reranker
is a scripted fake client here; tests/retriever/test_reranker_health.py and
test_degradation.py run real servers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import grpc
import pytest

from gateway.reasons import ReasonCode, rerank_code
from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, Unavailable
from services.retriever.fusion import RerankBlend
from services.retriever.rerank_client import RerankClient, RerankReply, RerankUnavailable
from services.retriever.rerank_languages import ReadableFilter, parse_languages
from services.retriever.reranker_health import RerankerHealth
from services.retriever.reranking import RerankCode, RerankOutcome, RerankStep
from tests.retriever.factories import hit, outcome_proto, uncoded_outcome_proto

pytestmark = pytest.mark.unit

QUERY = "restore from snapshots"
HITS = [hit(f"c{i}", text=f"passage {i}") for i in range(4)]


def later() -> Deadline:
    """Ample time, from now (a module-level deadline would pass during a long run)."""
    return Deadline.after(10.0)


class FakeRerankClient:
    """Fake Reranker client (test-only): answers with `reply` or raises `error`;
    records the calls."""

    def __init__(self, reply: RerankReply | None = None, error: Exception | None = None) -> None:
        self.reply = reply or RerankReply([float(i) for i in range(len(HITS))], False, "", "fake")
        self.error = error
        self.timeouts: list[float] = []

    async def rerank(self, query: str, passages: Sequence[str], timeout_s: float) -> RerankReply:
        self.timeouts.append(timeout_s)
        if self.error is not None:
            raise self.error
        return self.reply


def refused(code: grpc.StatusCode, details: str = "x") -> RerankUnavailable:
    """What RerankClient raises when the Reranker answers with `code`."""
    return RerankUnavailable(f"reranker {code.name}: {details}", code)


class FakeHealth(RerankerHealth):
    """A RerankerHealth with a fake Check that never answers SERVING (test-only);
    it records the step's reports and passes them to the real state machine."""

    def __init__(self) -> None:
        async def never_serving(timeout_s: float) -> bool:
            return False

        super().__init__(never_serving, initial_backoff_s=4.0, max_backoff_s=4.0)
        self.reports: list[str] = []

    def record_success(self) -> None:
        self.reports.append("success")
        super().record_success()

    def record_failure(self, code: grpc.StatusCode) -> None:
        self.reports.append(code.name)
        super().record_failure(code)


def step(client: FakeRerankClient | None, health: RerankerHealth | None = None) -> RerankStep:
    real: RerankClient | None = client  # type: ignore[assignment]
    return RerankStep(real, candidates=3, budget_ms=300, margin_ms=10, health=health)


async def run(s: RerankStep, deadline: Deadline | None = None) -> RerankOutcome:
    _, outcome = await s.run(QUERY, HITS, True, deadline or later())
    return outcome


async def test_reranked_head_then_fused_tail() -> None:
    hits, outcome = await step(FakeRerankClient()).run(QUERY, HITS, True, later())
    assert outcome.code == RerankCode.RERANKED and outcome.used and not outcome.fallback
    assert [h.chunk.chunk_id for h in hits] == ["c2", "c1", "c0", "c3"]
    assert outcome.candidates == outcome.reranked == 3 and outcome.model == "fake"


async def test_a_closed_gate_keeps_the_fused_order_and_says_why() -> None:
    close = RerankReply([1.0, 2.5, 0.5], False, "", "fake")  # best beats the first by 1.5
    gated = RerankStep(
        FakeRerankClient(close),  # type: ignore[arg-type]
        candidates=3,
        budget_ms=300,
        margin_ms=10,
        blend=RerankBlend(0.0, 1.0, 10.0, gate=2.0),  # the reranker alone, when it may
    )
    hits, outcome = await gated.run(QUERY, HITS, True, later())
    assert [h.chunk.chunk_id for h in hits] == ["c0", "c1", "c2", "c3"]
    assert [h.reranked for h in hits] == [True, True, True, False]  # scored, not moved
    assert outcome.code == RerankCode.ORDER_KEPT and outcome.reranked == 3
    assert outcome.used and not outcome.fallback  # scored, as asked: not degraded
    assert outcome.reason == (
        "fused order kept: the reranker's best score beats the first candidate's by "
        "1.50, less than its gate 2"
    )
    assert rerank_code(outcome_proto(outcome)) == ReasonCode.RERANKED_ORDER_KEPT
    assert rerank_code(uncoded_outcome_proto(outcome)) == ReasonCode.RERANKED_ORDER_KEPT
    sure = RerankReply([1.0, 3.5, 0.5], False, "", "fake")
    gated.client = FakeRerankClient(sure)  # type: ignore[assignment]
    hits, outcome = await gated.run(QUERY, HITS, True, later())
    assert hits[0].chunk.chunk_id == "c1" and outcome.reason == ""
    assert outcome.code == RerankCode.RERANKED


async def test_not_asked_outcomes_have_their_codes() -> None:
    assert (await step(FakeRerankClient()).run(QUERY, HITS, False, later()))[
        1
    ].code == "reranker_off"
    assert (await run(step(None))).code == "reranker_not_configured"
    assert (await step(FakeRerankClient()).run(QUERY, [], True, later()))[1].code == "no_candidates"


async def test_budget_comes_from_the_deadline() -> None:
    now = [50.0]
    client = FakeRerankClient()
    await run(step(client), Deadline(50.1, lambda: now[0]))
    assert client.timeouts == [pytest.approx(0.09)]  # 100 ms left − 10 ms margin < 300 ms
    await run(step(client), Deadline.never())
    assert client.timeouts[-1] == pytest.approx(0.3)


async def test_too_little_time_is_skipped_without_a_call() -> None:
    client = FakeRerankClient()
    outcome = await run(step(client), Deadline(50.012, lambda: 50.0))
    assert client.timeouts == []
    assert outcome.code == RerankCode.SKIPPED and outcome.fallback and outcome.requested
    assert outcome.reason == "deadline too short to rerank (2 ms left)"


@pytest.mark.parametrize(
    ("reply", "code", "reranked"),
    [
        (RerankReply([1.0, 2.0], True, "deadline", "fake"), RerankCode.PARTIAL, 2),
        (RerankReply([], True, "deadline", "fake"), RerankCode.TIMEOUT, 0),
        (RerankReply([1.0, math.nan, 2.0], False, "", "fake"), RerankCode.ERROR, 0),
    ],
)
async def test_incomplete_replies(reply: RerankReply, code: RerankCode, reranked: int) -> None:
    outcome = await run(step(FakeRerankClient(reply)))
    assert outcome.code == code and outcome.fallback and outcome.reranked == reranked


@pytest.mark.parametrize(
    ("error", "code", "down"),
    [
        (DeadlineExceeded("reranker did not answer within 290 ms"), RerankCode.TIMEOUT, False),
        (refused(grpc.StatusCode.UNAVAILABLE), RerankCode.UNAVAILABLE, True),
        (refused(grpc.StatusCode.FAILED_PRECONDITION), RerankCode.UNAVAILABLE, True),
        (refused(grpc.StatusCode.INTERNAL), RerankCode.ERROR, False),
        (Unavailable("no status"), RerankCode.UNAVAILABLE, False),
    ],
)
async def test_failures_have_codes_and_only_not_serving_ones_mark_it_down(
    error: Exception, code: RerankCode, down: bool
) -> None:
    health = FakeHealth()
    try:
        hits, outcome = await step(FakeRerankClient(error=error), health).run(
            QUERY, HITS, True, later()
        )
        assert hits == HITS and outcome.code == code and outcome.reason == str(error)
        assert outcome.fallback and outcome.requested and not outcome.used
        assert health.serving is not down
    finally:
        await health.stop()


async def test_not_serving_skips_the_call_and_says_so() -> None:
    client = FakeRerankClient(error=refused(grpc.StatusCode.UNAVAILABLE))
    health = FakeHealth()
    try:
        s = step(client, health)
        await run(s)
        outcomes = [await run(s) for _ in range(5)]
    finally:
        await health.stop()
    assert len(client.timeouts) == 1
    for outcome in outcomes:
        assert outcome.code == RerankCode.UNAVAILABLE and outcome.fallback and outcome.requested
        assert outcome.reason.startswith("reranker not serving; skipped (re-checking in ")
        assert outcome.candidates == 3 and not outcome.used


@pytest.mark.parametrize(
    ("client", "reports"),
    [
        (FakeRerankClient(), ["success"]),
        (FakeRerankClient(RerankReply([], True, "deadline", "fake")), ["success"]),  # it answered
        (FakeRerankClient(error=DeadlineExceeded("slow")), ["DEADLINE_EXCEEDED"]),
        (FakeRerankClient(error=refused(grpc.StatusCode.INTERNAL)), ["INTERNAL"]),
        (FakeRerankClient(error=refused(grpc.StatusCode.UNAVAILABLE)), ["UNAVAILABLE"]),
    ],
)
async def test_every_call_is_reported_to_the_health_tracker(
    client: FakeRerankClient, reports: list[str]
) -> None:
    health = FakeHealth()
    try:
        await run(step(client, health))
    finally:
        await health.stop()
    assert health.reports == reports


def test_codes_are_gateway_reason_codes() -> None:
    assert {c.value for c in RerankCode} <= {c.value for c in ReasonCode}


@pytest.mark.parametrize(
    "client",
    [
        FakeRerankClient(),
        FakeRerankClient(RerankReply([1.0], True, "deadline", "fake")),
        FakeRerankClient(RerankReply([], True, "deadline", "fake")),
        FakeRerankClient(error=DeadlineExceeded("reranker did not answer within 290 ms")),
        FakeRerankClient(error=refused(grpc.StatusCode.UNAVAILABLE)),
        FakeRerankClient(error=refused(grpc.StatusCode.INTERNAL)),
    ],
)
async def test_the_gateway_reads_the_code_or_the_same_from_the_reason(
    client: FakeRerankClient,
) -> None:
    outcome = await run(step(client))
    assert outcome_proto(outcome).code == outcome.code
    assert rerank_code(outcome_proto(outcome)) == outcome.code
    assert rerank_code(uncoded_outcome_proto(outcome)) == outcome.code  # an older Retriever


# A Reranker with no model (FAILED_PRECONDITION) and one skipped while it is
# NOT_SERVING: the gateway reads "unavailable" from the reason as well.
@pytest.mark.parametrize("phrase", ["not serving", "FAILED_PRECONDITION"])
async def test_the_gateway_reads_unavailable_for_a_reranker_without_a_model(phrase: str) -> None:
    health = FakeHealth()
    client = FakeRerankClient(error=refused(grpc.StatusCode.FAILED_PRECONDITION))
    try:
        s = step(client, health)
        outcome = await run(s)  # a FAILED_PRECONDITION refusal
        if phrase == "not serving":
            outcome = await run(s)  # skipped: marked down
    finally:
        await health.stop()
    assert rerank_code(outcome_proto(outcome)) == outcome.code
    assert rerank_code(uncoded_outcome_proto(outcome)) == outcome.code


async def test_candidates_all_in_a_language_it_cannot_read_are_not_sent() -> None:
    client = FakeRerankClient()
    chinese = [hit(f"z{i}", text=f"第{i}段：从快照恢复两个存储") for i in range(3)]
    english_only = RerankStep(
        client,  # type: ignore[arg-type]
        candidates=3,
        budget_ms=300,
        margin_ms=10,
        readable=ReadableFilter(parse_languages("en")),
    )
    hits, outcome = await english_only.run(QUERY, chinese, True, later())
    assert hits == chinese and client.timeouts == []  # never called
    assert outcome.code == RerankCode.NOT_USED and not outcome.fallback
    assert outcome.reason == (
        "not reranked: every candidate is in a language the reranker does not read "
        "(it reads en); fused order kept"
    )
