"""How many candidates to send the Reranker: as many as it can plausibly
score in the time this request has left, learnt from its replies.

Sending all `RAG_RERANK_CANDIDATES` whatever the load made reranking under
load mostly time out: the Reranker scored the first few calls' candidates
and ran out of time for the rest. Sized to the time left, every call asks
for what fits, and under load reranking degrades to fewer candidates,
reranked (partial), rather than to none.

The cost of one candidate is the time a call took as the Retriever saw it
(waiting at the Reranker and the round trip included) divided by the
candidates it scored, as a moving average that rises fast and falls slowly.
If a call of n candidates takes F + p·n (F: waiting and round trip, p: per
candidate), sizing the next call to `budget / ((F + p·n) / n)` settles where
F + p·n = budget: the most that fits. A call with nothing scored (a timeout)
halves the next one. Sending a candidate more than fits costs little: the
Reranker answers by the deadline with what it scored, and takes every
waiting call's first pair before anyone's second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Until the first reply: 5 ms per candidate sends all 20 default candidates
# with 100 ms or more left (MiniLM-L6 on 2 cores scores a 256-token pair in
# ~30 ms with torch, ~8 ms with ONNX int8; the first replies correct it).
PRIOR_MS_PER_CANDIDATE = 5.0
# Fewer than this barely reorders anything; and since the Reranker takes
# every waiting call's first pair before anyone's second, asking for a few
# more than fit costs the other calls nothing.
MIN_CANDIDATES = 3
# Sent beyond what the cost says fits: scored when the Reranker is faster
# this time (and the cost then learns it), else left unscored at no cost.
EXTRA_CANDIDATES = 1
RISE, FALL = 0.5, 0.2


@dataclass(frozen=True)
class CandidatePlan:
    """How many of the `available` head candidates to send, and why."""

    send: int
    available: int  # min(configured candidates, fused hits)
    configured: int  # RAG_RERANK_CANDIDATES
    ms_per_candidate: float
    budget_ms: float

    @property
    def shrunk(self) -> bool:
        return self.send < self.available

    def note(self) -> str:
        """What the reason says about sizing when it shrank the call."""
        return (
            f"{self.send} of {self.configured} candidates sent "
            f"(~{self.ms_per_candidate:.0f} ms each, {self.budget_ms:.0f} ms left)"
        )


class CandidateSizer:
    """The Reranker's cost per candidate, learnt from replies; one per Retriever
    (every request's calls teach it). Used from the event loop only."""

    def __init__(
        self,
        prior_ms: float = PRIOR_MS_PER_CANDIDATE,
        minimum: int = MIN_CANDIDATES,
        rise: float = RISE,
        fall: float = FALL,
    ) -> None:
        if prior_ms <= 0 or minimum < 1:
            raise ValueError(
                f"prior_ms > 0 and minimum >= 1 are required, got {prior_ms}, {minimum}"
            )
        for name, weight in (("rise", rise), ("fall", fall)):
            if not 0 < weight <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {weight}")
        self.ms_per_candidate = prior_ms
        self.minimum, self.rise, self.fall = minimum, rise, fall

    def plan(self, available: int, configured: int, budget_s: float) -> CandidatePlan:
        """As many of `available` as fit `budget_s` and one more, at least `minimum`."""
        budget_ms = budget_s * 1000
        cost = self.ms_per_candidate
        fit = available if cost <= 0 else math.floor(budget_ms / cost)
        send = min(available, max(fit + EXTRA_CANDIDATES, self.minimum))
        return CandidatePlan(send, available, configured, self.ms_per_candidate, budget_ms)

    def observe(self, sent: int, scored: int, latency_s: float, budget_s: float) -> None:
        """A call's outcome: `scored` of `sent` in `latency_s` (0 scored: a
        timeout, or nothing fit; not called when the Reranker failed otherwise)."""
        if sent <= 0:
            return
        # None scored in the time it had: as if only half of what was sent
        # could have been (halving the next call), the minimum as if only one.
        took_ms = latency_s * 1000 if scored else max(latency_s, budget_s) * 1000
        sample = took_ms / (scored or max(sent // 2, 1))
        weight = self.rise if sample > self.ms_per_candidate else self.fall
        self.ms_per_candidate += weight * (sample - self.ms_per_candidate)
