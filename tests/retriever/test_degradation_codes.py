"""Each failure in an answer carries a stable code decided from the
structured outcomes, never from their words: the answer, the metrics and the
gateway read the same code (the real-stack matrix is test_degradation.py)."""

from __future__ import annotations

import pytest

from gateway.reasons import ReasonCode, degradation_code
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.retriever.channels import ChannelOutcome, ChannelStatus
from services.retriever.degradation import UNAVAILABLE, Degraded, degradation
from services.retriever.reranking import RerankCode, RerankOutcome
from services.retriever.types import Channel

pytestmark = pytest.mark.unit


def fallback(code: RerankCode, reranked: int = 0) -> RerankOutcome:
    return RerankOutcome(
        code, fallback=True, requested=True, reason="said in words", reranked=reranked
    )


def test_codes_come_from_the_structured_outcomes() -> None:
    embedding = ChannelOutcome(
        Channel.VECTOR, ChannelStatus.ERROR, error="x", component="embedding"
    )
    lexical = ChannelOutcome(Channel.LEXICAL, ChannelStatus.TIMEOUT, error="y", component="lexical")
    degraded, message = degradation(fallback(RerankCode.PARTIAL, reranked=2), embedding, lexical)
    assert degraded == [
        Degraded("embedding", "embedding_error", "error: x"),
        Degraded("lexical", "lexical_timeout", "timeout: y"),
        Degraded("reranker", "reranker_partial", "said in words"),
    ]
    assert message == UNAVAILABLE  # every channel asked failed
    assert [d.coded_component for d in degraded] == ["embedding", "lexical", "reranker"]


def test_a_channel_outside_the_closed_set_is_coded_by_its_channel() -> None:
    odd = ChannelOutcome(Channel.LEXICAL, ChannelStatus.SKIPPED, error="z", component="tantivy")
    ok = ChannelOutcome(Channel.VECTOR, ChannelStatus.OK)
    degraded, message = degradation(RerankOutcome(RerankCode.OFF), ok, odd)
    assert degraded == [Degraded("tantivy", "lexical_skipped", "skipped: z")]
    assert degraded[0].coded_component == "lexical" and message == ""


def test_nothing_left_out_or_not_asked_is_a_degradation() -> None:
    left_out = ChannelOutcome(Channel.VECTOR, ChannelStatus.SKIPPED, requested=False)
    ok = ChannelOutcome(Channel.LEXICAL, ChannelStatus.OK)
    kept = RerankOutcome(RerankCode.ORDER_KEPT, used=True, requested=True, reranked=4)
    assert degradation(kept, left_out, ok) == ([], "")
    assert degradation(RerankOutcome(RerankCode.OFF), left_out, ok) == ([], "")


def test_a_rerank_code_that_is_not_a_failure_is_told_as_an_error() -> None:
    odd = RerankOutcome(RerankCode.RERANKED, fallback=True, requested=True, reason="?")
    ok = ChannelOutcome(Channel.VECTOR, ChannelStatus.OK)
    assert degradation(odd, ok)[0] == [Degraded("reranker", "reranker_error", "?")]


@pytest.mark.parametrize(
    ("sent", "code"),
    [
        # The code wins over words that would say otherwise.
        (
            rpb.Degradation(component="vector", reason="error: x", code="vector_timeout"),
            "vector_timeout",
        ),
        # No code (an older Retriever): the reason's status prefix.
        (rpb.Degradation(component="vector", reason="timeout: 300 ms"), "vector_timeout"),
        # A code the gateway does not know, or one naming another component.
        (
            rpb.Degradation(component="lexical", reason="skipped: x", code="lexical_new"),
            "lexical_skipped",
        ),
        (
            rpb.Degradation(component="lexical", reason="error: x", code="vector_timeout"),
            "lexical_error",
        ),
    ],
)
def test_the_gateway_reads_the_code_before_the_words(sent: rpb.Degradation, code: str) -> None:
    assert degradation_code(sent, rpb.RerankOutcome()) == ReasonCode(code)
