"""The rerank step: send the top fused candidates to the Reranker with a
deadline of min(budget, time left − margin), as many of them as it can
plausibly score in that time (`rerank_sizing`); keep the fused order for
whatever was not sent or not scored in time, and say what happened.

Each outcome carries a stable `code` (the values of gateway/reasons.py
`ReasonCode`), set where the outcome is decided, next to the free-text
`reason` meant for operators; the answer carries both. The reasons keep
their fixed leading phrases for gateways that predate the code. A call sized
below the configured candidates is partial even when every candidate sent
was scored, and its reason says how many were sent of how many configured."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import grpc

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, Unavailable
from services.retriever.fusion import RERANK_ONLY, RerankBlend, place_reranked
from services.retriever.rerank_client import RerankClient, RerankReply, RerankUnavailable
from services.retriever.rerank_languages import EVERY_LANGUAGE, ReadableFilter
from services.retriever.rerank_sizing import CandidatePlan, CandidateSizer
from services.retriever.reranker_health import NOT_SERVING_CODES, RerankerHealth
from services.retriever.reranker_limit import RerankerLimit
from services.retriever.tail_reserve import TailReserve
from services.retriever.types import FusedHit

# Below this there is no point in asking: a round trip alone takes longer.
MIN_USEFUL_BUDGET_S = 0.005
NOT_SERVING_REASON = "reranker not serving"


class RerankCode(StrEnum):
    """What happened to reranking; equal to gateway/reasons.py ReasonCode values."""

    RERANKED = "reranked"
    ORDER_KEPT = "reranked_order_kept"  # scored; the blend's gate kept the fused order
    PARTIAL = "reranker_partial"
    TIMEOUT = "reranker_timeout"
    UNAVAILABLE = "reranker_unavailable"
    ERROR = "reranker_error"
    SKIPPED = "reranker_skipped"  # too little time left to ask
    OFF = "reranker_off"  # the request did not ask for it
    NOT_CONFIGURED = "reranker_not_configured"
    NO_CANDIDATES = "no_candidates"
    NOT_USED = "reranker_not_used"  # nothing in a language its model reads


@dataclass
class RerankOutcome:
    code: str  # a RerankCode value: decided with the outcome, never parsed from `reason`
    used: bool = False  # the final order reflects reranking
    fallback: bool = False  # fused order kept, in whole or in part
    requested: bool = False  # reranking was wanted and possible
    reason: str = ""
    candidates: int = 0
    reranked: int = 0
    model: str = ""
    latency_ms: float = 0.0
    unread: int = 0  # candidates not sent: in a language the model does not read
    # When the rest of the request began to count against the reserve: the
    # call's return or its budget's end, whichever came first (step clock).
    tail_from: float | None = None


Ranked = tuple[list[FusedHit], RerankOutcome]


def passage_text(hit: FusedHit) -> str:
    chunk = hit.chunk
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


def not_serving_reason(recheck_in_s: float) -> str:
    when = f"in {recheck_in_s:.1f} s" if recheck_in_s > 0 else "now"
    return f"{NOT_SERVING_REASON}; skipped (re-checking {when})"


class RerankStep:
    def __init__(
        self,
        client: RerankClient | None,
        candidates: int,
        budget_ms: int,
        margin_ms: int,
        health: RerankerHealth | None = None,
        sizer: CandidateSizer | None = None,
        clock: Callable[[], float] = time.perf_counter,
        blend: RerankBlend = RERANK_ONLY,
        readable: ReadableFilter | None = None,
        reserve: TailReserve | None = None,
        limit: RerankerLimit | None = None,
    ) -> None:
        """`health`: when given, a Reranker known not to serve is not called
        (and calls that fail are reported to it); None calls it every time.
        `sizer`: how many candidates fit the time left (default: learnt from
        this step's calls); `clock` times the calls (tests pass a fake).
        `blend`: how the scores combine with the fused order; `readable`: the
        languages the Reranker's model reads (default: every language);
        `reserve`: the margin kept back for the rest of the request, learnt
        (`observe_tail`) and never below `margin_ms`; `limit`: the Reranker's
        own cap on passages per call, learnt from it (None: `candidates`)."""
        self.client = client
        self.candidates = candidates
        self.budget_s = budget_ms / 1000
        self.reserve = reserve or TailReserve(floor_s=margin_ms / 1000)
        self.health = health
        self.sizer = sizer or CandidateSizer()
        self._clock = clock
        self.blend = blend
        self.readable = readable or ReadableFilter({EVERY_LANGUAGE})
        self.limit = limit

    async def run(
        self, query: str, fused: list[FusedHit], enabled: bool, deadline: Deadline
    ) -> Ranked:
        if not enabled:
            return fused, RerankOutcome(RerankCode.OFF, reason="disabled by request")
        if self.client is None:
            return fused, RerankOutcome(RerankCode.NOT_CONFIGURED, reason="no reranker configured")
        if not fused:
            return fused, RerankOutcome(RerankCode.NO_CANDIDATES, reason="no candidates")
        count = self.limit.candidates() if self.limit is not None else self.candidates
        head, tail = fused[:count], fused[count:]
        if self.health is not None and not self.health.should_call():
            reason = not_serving_reason(self.health.next_probe_in_s())
            return fused, self._fallback(RerankCode.UNAVAILABLE, reason, len(head))
        budget = deadline.budget(self.budget_s, self.reserve.margin_s())
        if budget < MIN_USEFUL_BUDGET_S:
            reason = f"deadline too short to rerank ({budget * 1000:.0f} ms left)"
            return fused, self._fallback(RerankCode.SKIPPED, reason, len(head))
        if language := self.readable.unread(query):
            return fused, self._not_read(f"the question is in {language}", len(head))
        unread = [i for i, hit in enumerate(head) if self.readable.unread(passage_text(hit))]
        readable = [i for i in range(len(head)) if i not in set(unread)]
        if not readable:
            return fused, self._not_read("every candidate is", len(head))
        plan = self.sizer.plan(len(readable), count, budget)
        call = RerankCall(head, readable[: plan.send], len(unread), plan)
        return await self._call(query, call, tail, budget)

    def observe_tail(self, outcome: RerankOutcome) -> None:
        """The request that `outcome` belongs to is answered: teach the
        reserve how long it took after its rerank call."""
        if outcome.tail_from is not None:
            self.reserve.observe(self._clock() - outcome.tail_from)

    def _not_read(self, what: str, candidates: int) -> RerankOutcome:
        """Not a fault, not load: the model cannot read this; fused order."""
        reason = (
            f"not reranked: {what} in a language the reranker does not read "
            f"(it reads {self.readable.describe()}); fused order kept"
        )
        return RerankOutcome(
            RerankCode.NOT_USED, requested=True, reason=reason, candidates=candidates
        )

    @staticmethod
    def _fallback(code: RerankCode, reason: str, candidates: int) -> RerankOutcome:
        """Wanted, not done: the fused order stands."""
        return RerankOutcome(
            code, fallback=True, requested=True, reason=reason, candidates=candidates
        )

    async def _call(
        self, query: str, call: RerankCall, tail: list[FusedHit], budget: float
    ) -> Ranked:
        """Rerank the candidates `call` sends; every other one keeps its place."""
        assert self.client is not None
        head, sent = call.head, call.sent_hits()
        started = self._clock()
        try:
            reply = await self.client.rerank(query, [passage_text(h) for h in sent], budget)
        except (DeadlineExceeded, Unavailable) as exc:
            latency_s = self._clock() - started
            code = self._record_failure(exc)
            if code == RerankCode.TIMEOUT:  # slow, not broken: it teaches the cost
                self.sizer.observe(len(sent), 0, latency_s, budget)
            outcome = self._fallback(code, _with_plan(str(exc), call.plan), len(sent))
            outcome.latency_ms = latency_s * 1000
            outcome.unread = call.unread
            outcome.tail_from = started + min(latency_s, budget)
            return head + tail, outcome
        latency_s = self._clock() - started
        self.sizer.observe(len(sent), min(len(reply.scores), len(sent)), latency_s, budget)
        if self.health is not None:
            self.health.record_success()  # it answered, even if only in part
        outcome = RerankOutcome(RerankCode.RERANKED, requested=True, candidates=len(sent))
        outcome.latency_ms = latency_s * 1000
        outcome.model = reply.model
        outcome.unread = call.unread
        outcome.tail_from = started + min(latency_s, budget)
        return self._merge(call, tail, reply, outcome)

    def _record_failure(self, exc: DeadlineExceeded | Unavailable) -> RerankCode:
        """Tell the health tracker, and say which failure this was."""
        if isinstance(exc, DeadlineExceeded):
            status = grpc.StatusCode.DEADLINE_EXCEEDED
        elif isinstance(exc, RerankUnavailable):
            status = exc.code
        else:  # no status to go on: say unavailable, but do not mark it down
            return RerankCode.UNAVAILABLE
        if self.health is not None:
            self.health.record_failure(status)  # it decides which statuses count
        if status == grpc.StatusCode.INVALID_ARGUMENT and self.limit is not None:
            self.limit.forget()  # perhaps restarted with a lower cap: ask it again
        if status == grpc.StatusCode.DEADLINE_EXCEEDED:
            return RerankCode.TIMEOUT
        return RerankCode.UNAVAILABLE if status in NOT_SERVING_CODES else RerankCode.ERROR

    def _merge(
        self, call: RerankCall, tail: list[FusedHit], reply: RerankReply, outcome: RerankOutcome
    ) -> Ranked:
        scores = reply.scores[: len(call.sent)]
        try:
            merged = place_reranked(
                call.head, dict(zip(call.sent, scores, strict=False)), self.blend
            )
        except ValueError as exc:  # e.g. NaN scores: never fail a Retrieve over it
            outcome.code, outcome.fallback = RerankCode.ERROR, True
            outcome.reason = f"unusable reranker reply: {exc}"
            return call.head + tail, outcome
        outcome.reranked = len(scores)
        outcome.used = bool(scores)
        incomplete = reply.partial or len(scores) < len(call.sent)
        plan = call.plan
        if incomplete or plan.shrunk:
            # Nothing scored at all is the Reranker's own deadline: a timeout.
            outcome.code = RerankCode.PARTIAL if scores else RerankCode.TIMEOUT
            outcome.fallback = True
            why = (reply.stop_reason or "stopped early") if incomplete else "sized to the time left"
            outcome.reason = _with_plan(
                f"partial: {len(scores)} of {len(call.sent)} scored ({why}); rest in fused order",
                plan,
            )
        gate_note = self._gate_note(scores)
        if gate_note and outcome.code == RerankCode.RERANKED:
            outcome.code = RerankCode.ORDER_KEPT
        notes = [gate_note, self._unread_note(call.unread, len(call.head))]
        outcome.reason = "; ".join(note for note in [outcome.reason, *notes] if note)
        return merged + tail, outcome

    def _gate_note(self, scores: list[float]) -> str:
        if len(scores) < 2 or self.blend.opens(scores):
            return ""
        return (
            f"fused order kept: the reranker's best score beats the first candidate's by "
            f"{self.blend.disagreement(scores):.2f}, less than its gate {self.blend.gate:g}"
        )

    def _unread_note(self, unread: int, candidates: int) -> str:
        if not unread:
            return ""
        return (
            f"{unread} of {candidates} candidates not scored: mostly in a language the "
            f"reranker does not read (it reads {self.readable.describe()}); they keep "
            "their fused places"
        )


@dataclass(frozen=True)
class RerankCall:
    """`head`: the candidates in fused order; `sent`: the positions in it sent
    to the Reranker; `unread`: how many were left out for their language."""

    head: list[FusedHit]
    sent: list[int]
    unread: int
    plan: CandidatePlan

    def sent_hits(self) -> list[FusedHit]:
        return [self.head[i] for i in self.sent]


def _with_plan(reason: str, plan: CandidatePlan) -> str:
    """The reason, and (when the call was sized down) how many were sent of
    how many configured. Appended: the gateway reads the leading phrase."""
    return f"{reason}; {plan.note()}" if plan.shrunk else reason
