"""What failed in an answer, said in the answer (and logged once when it is
a fault rather than load)."""

from __future__ import annotations

from services.core.logging import get_logger
from services.retriever.channels import ChannelOutcome, ChannelStatus
from services.retriever.requests import RetrievalResult
from services.retriever.reranking import RerankCode

log = get_logger(__name__)


def record_degradation(
    result: RetrievalResult, vector: ChannelOutcome, *others: ChannelOutcome
) -> None:
    """Say in the answer what failed. Failures are logged here, once per
    request (the request id comes from the log context); timeouts, skips and
    reranker fallbacks are expected under load or while a part restarts:
    they are counted in the metrics, not logged per request."""
    requested = [o for o in (vector, *others) if o.requested]
    for outcome in requested:
        if not outcome.ok:
            component = outcome.component or outcome.channel.value
            reason = f"{outcome.status.value}: {outcome.error}"
            result.degraded.append((component, reason))
            if outcome.status is ChannelStatus.ERROR:
                log.warning("channel_failed", component=component, reason=outcome.error)
    if result.rerank.fallback and result.rerank.requested:
        result.degraded.append(("reranker", result.rerank.reason))
        if result.rerank.code == RerankCode.ERROR:  # not load, not absence: a fault
            log.warning("rerank_failed", reason=result.rerank.reason)
    if requested and not any(o.ok for o in requested):
        result.message = (
            "Search is temporarily unavailable: the retrieval channels failed. "
            "Please try again shortly."
        )
