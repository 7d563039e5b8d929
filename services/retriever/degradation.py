"""What failed in an answer, said in the answer (and logged once when it is
a fault rather than load)."""

from __future__ import annotations

from services.core.logging import get_logger
from services.retriever.channels import ChannelOutcome, ChannelStatus
from services.retriever.reranking import RerankCode, RerankOutcome

log = get_logger(__name__)


UNAVAILABLE = (
    "Search is temporarily unavailable: the retrieval channels failed. Please try again shortly."
)


def degradation(
    rerank: RerankOutcome, vector: ChannelOutcome, *others: ChannelOutcome
) -> tuple[list[tuple[str, str]], str]:
    """What failed, to say in the answer: (component, reason) pairs and the
    answer's message ("" unless every requested channel failed). Failures are
    logged here, once per request (the request id comes from the log
    context); timeouts, skips and reranker fallbacks are expected under load
    or while a part restarts: they are counted in the metrics, not logged
    per request."""
    degraded: list[tuple[str, str]] = []
    requested = [o for o in (vector, *others) if o.requested]
    for outcome in requested:
        if not outcome.ok:
            component = outcome.component or outcome.channel.value
            degraded.append((component, f"{outcome.status.value}: {outcome.error}"))
            if outcome.status is ChannelStatus.ERROR:
                log.warning("channel_failed", component=component, reason=outcome.error)
    if rerank.fallback and rerank.requested:
        degraded.append(("reranker", rerank.reason))
        if rerank.code == RerankCode.ERROR:  # not load, not absence: a fault
            log.warning("rerank_failed", reason=rerank.reason)
    failed = bool(requested) and not any(o.ok for o in requested)
    return degraded, UNAVAILABLE if failed else ""
