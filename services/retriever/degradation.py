"""What failed in an answer, said in the answer (and logged once when it is
a fault rather than load).

Each failure carries a stable code beside its free-text reason, decided here
from the structured outcome (a channel's status, the rerank step's code) and
never parsed back out of the words: the metrics count it, the answer carries
it, and the gateway turns it into its public reason (gateway/reasons.py)."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.logging import get_logger
from services.retriever.channels import ChannelOutcome, ChannelStatus
from services.retriever.reranking import RerankCode, RerankOutcome

log = get_logger(__name__)


UNAVAILABLE = (
    "Search is temporarily unavailable: the retrieval channels failed. Please try again shortly."
)
# The components a channel failure is coded under: a closed set, so a new
# channel cannot grow the metrics' labels or the gateway's codes unnoticed.
CHANNEL_COMPONENTS = ("vector", "lexical", "embedding")
# The rerank codes that make an answer degraded (gateway/reasons.py agrees).
RERANKER_FAILURES = (
    RerankCode.TIMEOUT,
    RerankCode.UNAVAILABLE,
    RerankCode.ERROR,
    RerankCode.PARTIAL,
    RerankCode.SKIPPED,
)


@dataclass(frozen=True)
class Degraded:
    """One part of the answer that failed: `component` as reported (the
    channel's own name when it has one), `code` for programs, `reason` for
    operators (addresses, exception text)."""

    component: str
    code: str
    reason: str

    @property
    def coded_component(self) -> str:
        """The component the code names (its metrics label)."""
        return "reranker" if self.component == "reranker" else self.code.rsplit("_", 1)[0]


def channel_failure(outcome: ChannelOutcome) -> Degraded:
    """A requested channel that did not answer: `{component}_{status}`."""
    component = outcome.component or outcome.channel.value
    coded = component if component in CHANNEL_COMPONENTS else outcome.channel.value
    return Degraded(
        component, f"{coded}_{outcome.status.value}", f"{outcome.status.value}: {outcome.error}"
    )


def rerank_failure(rerank: RerankOutcome) -> Degraded:
    """Reranking was wanted and the fused order stands, in whole or in part."""
    known = rerank.code in {code.value for code in RERANKER_FAILURES}
    return Degraded("reranker", rerank.code if known else RerankCode.ERROR.value, rerank.reason)


def degradation(
    rerank: RerankOutcome, vector: ChannelOutcome, *others: ChannelOutcome
) -> tuple[list[Degraded], str]:
    """What failed, to say in the answer, and the answer's message ("" unless
    every requested channel failed). Failures are logged here, once per
    request (the request id comes from the log context); timeouts, skips and
    reranker fallbacks are expected under load or while a part restarts: they
    are counted in the metrics, not logged per request."""
    degraded: list[Degraded] = []
    requested = [o for o in (vector, *others) if o.requested]
    for outcome in requested:
        if not outcome.ok:
            degraded.append(failure := channel_failure(outcome))
            if outcome.status is ChannelStatus.ERROR:
                log.warning("channel_failed", component=failure.component, reason=outcome.error)
    if rerank.fallback and rerank.requested:
        degraded.append(rerank_failure(rerank))
        if rerank.code == RerankCode.ERROR:  # not load, not absence: a fault
            log.warning("rerank_failed", reason=rerank.reason)
    failed = bool(requested) and not any(o.ok for o in requested)
    return degraded, UNAVAILABLE if failed else ""
