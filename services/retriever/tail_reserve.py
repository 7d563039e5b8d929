"""How much of a request's time to keep back after its channels and its
rerank call end: learnt from the requests themselves.

The rerank call gets min(budget, time left − margin), and what follows it
(whole rows, evidence, the reply's serialisation) and the event loop's own
lateness must fit in the margin. A fixed 10 ms holds on an idle machine;
under load the rest of a request takes longer, and a reply that leaves
after the caller's deadline turns a degraded answer (fused order) into
DEADLINE_EXCEEDED, an error. So the margin is the larger of the configured
one and a decaying high-water mark of what requests really needed after
their rerank budget ended, with headroom, capped so one stall cannot shut
reranking out (the mark decays with every request observed).

The channels keep the same margin back when the caller's deadline, not
their own timeout, ends them: what follows them is the same rest of the
request (the rerank step skips itself when no useful time is left).

The channels keep back no more than a quarter of the time a request has
left, though (`margin_within`): a caller that allows 60 ms would otherwise
see its channels given 10 of them and come back empty on an idle machine,
to protect a reply that takes a few. The rerank call, which the answer can
do without, keeps the whole margin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.deadline import Deadline

CEILING_S = 0.2  # never keep back more than this: reranking would rarely run
DECAY = 0.9  # per observed request: a stall is forgotten within ~30 requests
HEADROOM = 1.5  # what was needed, and half again
MAX_SHARE = 0.25  # of the time a request has left


@dataclass
class TailReserve:
    """The margin the rerank step leaves: max(floor, mark × headroom), capped."""

    floor_s: float
    ceiling_s: float = CEILING_S
    _mark_s: float = field(default=0.0, init=False)

    def observe(self, tail_s: float) -> None:
        """A request needed `tail_s` after its rerank budget ended (or its
        call returned, if sooner)."""
        self._mark_s = max(max(tail_s, 0.0), self._mark_s * DECAY)

    def forget(self) -> None:
        """Start afresh from the floor (a test that loaded the machine)."""
        self._mark_s = 0.0

    def margin_s(self) -> float:
        return min(max(self.ceiling_s, self.floor_s), max(self.floor_s, self._mark_s * HEADROOM))

    def margin_within(self, deadline: Deadline) -> float:
        """The margin for a request with `deadline`: `margin_s`, at most a
        quarter of its time left."""
        return min(self.margin_s(), MAX_SHARE * max(deadline.remaining_s(), 0.0))
