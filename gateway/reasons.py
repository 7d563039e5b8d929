"""Stable codes for what went wrong downstream, instead of the Retriever's words.

The Retriever explains a degraded answer in free text meant for operators:
the reranker's address, gRPC details, model names, cache and offline-mode
hints. The public JSON carries a code (part of the API: add codes, never
rename one) and a fixed message per code; the gateway logs the free text with
the request id, and returns it only to callers it is configured to trust
(`RAG_GATEWAY_DEBUG_REASONS`).

The Retriever codes each outcome itself (`RerankOutcome.code`,
`Degradation.code`, decided where the outcome is): a code this module knows
is taken as it is. A Retriever older than those fields sends none; then the
code comes from the structured fields (the degradation's component, the
rerank outcome's `used`/`fallback`/`reranked`), refined by the fixed prefixes
that Retriever writes (a channel's reason starts with its status, `timeout:
…`; the rerank step's reasons are fixed phrases). Anything unrecognised
still gets a code: the component's generic `…_error`, or `reranker_not_used`.
"""

from __future__ import annotations

from enum import StrEnum

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

MAX_LOGGED_CHARS = 1000


class ReasonCode(StrEnum):
    VECTOR_TIMEOUT = "vector_timeout"
    VECTOR_ERROR = "vector_error"
    VECTOR_SKIPPED = "vector_skipped"
    LEXICAL_TIMEOUT = "lexical_timeout"
    LEXICAL_ERROR = "lexical_error"
    LEXICAL_SKIPPED = "lexical_skipped"
    EMBEDDING_TIMEOUT = "embedding_timeout"
    EMBEDDING_ERROR = "embedding_error"
    EMBEDDING_SKIPPED = "embedding_skipped"
    RERANKER_TIMEOUT = "reranker_timeout"
    RERANKER_UNAVAILABLE = "reranker_unavailable"
    RERANKER_ERROR = "reranker_error"
    RERANKER_PARTIAL = "reranker_partial"
    RERANKER_SKIPPED = "reranker_skipped"
    RERANKED = "reranked"
    RERANKED_ORDER_KEPT = "reranked_order_kept"
    RERANKER_OFF = "reranker_off"
    RERANKER_NOT_CONFIGURED = "reranker_not_configured"
    NO_CANDIDATES = "no_candidates"
    RERANKER_NOT_USED = "reranker_not_used"
    OTHER_ERROR = "other_error"


_FUSED = "results are in their fused order"
_NO_VECTOR = "semantic search was left out"
MESSAGES: dict[ReasonCode, str] = {
    ReasonCode.VECTOR_TIMEOUT: "Semantic search did not answer in time; results may be incomplete.",
    ReasonCode.VECTOR_ERROR: "Semantic search failed; results may be incomplete.",
    ReasonCode.VECTOR_SKIPPED: "No time was left for semantic search; results may be incomplete.",
    ReasonCode.LEXICAL_TIMEOUT: "Keyword search did not answer in time; results may be incomplete.",
    ReasonCode.LEXICAL_ERROR: "Keyword search failed; results may be incomplete.",
    ReasonCode.LEXICAL_SKIPPED: "No time was left for keyword search; results may be incomplete.",
    ReasonCode.EMBEDDING_TIMEOUT: f"The query was not embedded in time; {_NO_VECTOR}.",
    ReasonCode.EMBEDDING_ERROR: f"The query could not be embedded; {_NO_VECTOR}.",
    ReasonCode.EMBEDDING_SKIPPED: f"No time was left to embed the query; {_NO_VECTOR}.",
    ReasonCode.RERANKER_TIMEOUT: f"The reranker did not answer in time; {_FUSED}.",
    ReasonCode.RERANKER_UNAVAILABLE: f"The reranker is unavailable; {_FUSED}.",
    ReasonCode.RERANKER_ERROR: f"The reranker failed; {_FUSED}.",
    ReasonCode.RERANKER_PARTIAL: "The reranker scored only some candidates in time; "
    "the rest keep their fused order.",
    ReasonCode.RERANKER_SKIPPED: f"Too little time was left to rerank; {_FUSED}.",
    ReasonCode.RERANKED: "The results were reranked.",
    ReasonCode.RERANKED_ORDER_KEPT: "The reranker scored the results and did not disagree "
    "enough with their order to change it.",
    ReasonCode.RERANKER_OFF: "Reranking was not asked for.",
    ReasonCode.RERANKER_NOT_CONFIGURED: f"No reranker is configured; {_FUSED}.",
    ReasonCode.NO_CANDIDATES: "There was nothing to rerank.",
    ReasonCode.RERANKER_NOT_USED: f"The results were not reranked; {_FUSED}.",
    ReasonCode.OTHER_ERROR: "Part of the search failed; results may be incomplete.",
}

CHANNEL_COMPONENTS = ("vector", "lexical", "embedding")
COMPONENTS = (*CHANNEL_COMPONENTS, "reranker")
_CHANNEL_STATUSES = ("timeout", "error", "skipped")

# The rerank step's fixed phrases (services/retriever/reranking.py and
# rerank_client.py), most specific first.
_RERANK_FALLBACKS: tuple[tuple[str, ReasonCode], ...] = (
    ("deadline too short to rerank", ReasonCode.RERANKER_SKIPPED),
    ("reranker did not answer within", ReasonCode.RERANKER_TIMEOUT),
    ("reranker DEADLINE_EXCEEDED", ReasonCode.RERANKER_TIMEOUT),
    ("reranker UNAVAILABLE", ReasonCode.RERANKER_UNAVAILABLE),
    # The Reranker refusing because it has no model loaded, and the Retriever
    # skipping it while its health says NOT_SERVING: both mean "unavailable".
    ("reranker FAILED_PRECONDITION", ReasonCode.RERANKER_UNAVAILABLE),
    ("reranker not serving", ReasonCode.RERANKER_UNAVAILABLE),
)
_RERANKER_FAILURES = frozenset(
    {
        ReasonCode.RERANKER_TIMEOUT,
        ReasonCode.RERANKER_UNAVAILABLE,
        ReasonCode.RERANKER_ERROR,
        ReasonCode.RERANKER_PARTIAL,
        ReasonCode.RERANKER_SKIPPED,
    }
)
# The rerank blend's gate kept the fused order (services/retriever/reranking.py).
_ORDER_KEPT = "fused order kept:"
_RERANK_NOT_ASKED = {
    "disabled by request": ReasonCode.RERANKER_OFF,
    "no reranker configured": ReasonCode.RERANKER_NOT_CONFIGURED,
    "no candidates": ReasonCode.NO_CANDIDATES,
}


def public_component(component: str) -> str:
    return component if component in COMPONENTS else "other"


def _known(code: str) -> ReasonCode | None:
    try:
        return ReasonCode(code) if code else None
    except ValueError:  # a newer Retriever's code: read the other fields
        return None


def rerank_code(outcome: pb.RerankOutcome) -> ReasonCode:
    coded = _known(outcome.code)
    if coded is not None and (coded in _RERANKER_FAILURES) == outcome.fallback:
        return coded
    return _legacy_rerank_code(outcome)


def _legacy_rerank_code(outcome: pb.RerankOutcome) -> ReasonCode:
    """From a Retriever that does not code its outcomes."""
    if not outcome.fallback:
        if outcome.used and _ORDER_KEPT in outcome.reason:
            return ReasonCode.RERANKED_ORDER_KEPT
        if outcome.used:
            return ReasonCode.RERANKED
        return _RERANK_NOT_ASKED.get(outcome.reason, ReasonCode.RERANKER_NOT_USED)
    if outcome.reranked > 0:
        return ReasonCode.RERANKER_PARTIAL  # some scores arrived: the head is reranked
    if outcome.reason.startswith("partial:"):
        return ReasonCode.RERANKER_TIMEOUT  # the reranker's own deadline, before any score
    for prefix, code in _RERANK_FALLBACKS:
        if outcome.reason.startswith(prefix):
            return code
    return ReasonCode.RERANKER_ERROR


def degradation_code(degradation: pb.Degradation, rerank: pb.RerankOutcome) -> ReasonCode:
    component = degradation.component
    if component == "reranker":
        code = rerank_code(rerank)
        return code if code in _RERANKER_FAILURES else ReasonCode.RERANKER_ERROR
    if component not in CHANNEL_COMPONENTS:
        return ReasonCode.OTHER_ERROR
    coded = _known(degradation.code)
    if coded is not None and coded.value.startswith(f"{component}_"):
        return coded
    status = degradation.reason.split(":", 1)[0].strip().lower()
    return ReasonCode(f"{component}_{status if status in _CHANNEL_STATUSES else 'error'}")


def one_line(text: str) -> str:
    """Free text for a log field: whitespace collapsed, bounded."""
    return " ".join(text.split())[:MAX_LOGGED_CHARS]
