"""Degraded answers carry stable codes, not the Retriever's own words.

Through the gateway in front of the REAL Retriever (real stores and model),
with faults injected around its stores, its embedder and a stand-in Reranker
(tests/support/faults.py, test-only): each failure reaches the public JSON as
a code and a fixed message; the Retriever's reason (addresses, exception
text) goes to one log line with the request id, and into the response only
when RAG_GATEWAY_DEBUG_REASONS trusts the callers and they ask for debug."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import httpx
import pytest
import structlog

from gateway.reasons import MESSAGES, ReasonCode, degradation_code, rerank_code
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.embedding.embedder import Embedder
from tests.gateway.support import ALLOWED_ORIGIN, gateway_settings, serve_gateway
from tests.support.faults import HANG, RAISE
from tests.support.faulty_stack import Faults
from tests.support.faulty_stack import faulty_stack as running_faulty_stack
from tests.support.stack import BackgroundStack

QUERY = "how do I restore the stores from snapshots"


@pytest.fixture(scope="module")
def faulty_stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[tuple[Faults, BackgroundStack]]:
    with running_faulty_stack(tmp_path_factory.mktemp("gateway-reasons"), embedder) as running:
        yield running


@pytest.fixture
def faulty(
    faulty_stack: tuple[Faults, BackgroundStack],
) -> Iterator[tuple[Faults, BackgroundStack]]:
    faulty_stack[0].reset()
    yield faulty_stack
    faulty_stack[0].reset()


async def _search(
    retriever_addr: str, debug: bool = True, **overrides: Any
) -> tuple[httpx.Response, list[MutableMapping[str, Any]]]:
    settings = gateway_settings(retriever_addr, **overrides)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        with structlog.testing.capture_logs() as logs:
            response = await client.post(
                f"{gw.url}/v1/search",
                json={"query": QUERY, "debug": debug},
                headers={"Origin": ALLOWED_ORIGIN},
            )
    assert response.status_code == 200, response.text
    return response, [entry for entry in logs if entry.get("event") == "retriever_degraded"]


FAULTS = [
    pytest.param("vectors", RAISE, {"vector": "vector_error"}, "reranked", id="vector-down"),
    pytest.param("vectors", HANG, {"vector": "vector_timeout"}, "reranked", id="vector-slow"),
    pytest.param("lexical", RAISE, {"lexical": "lexical_error"}, "reranked", id="lexical-down"),
    pytest.param("lexical", HANG, {"lexical": "lexical_timeout"}, "reranked", id="lexical-slow"),
    pytest.param(
        "embedder", RAISE, {"embedding": "embedding_error"}, "reranked", id="embedding-down"
    ),
    pytest.param(
        "reranker", "slow", {"reranker": "reranker_timeout"}, "reranker_timeout", id="rerank-slow"
    ),
    pytest.param(
        "reranker", "error", {"reranker": "reranker_error"}, "reranker_error", id="rerank-error"
    ),
    pytest.param(
        "reranker",
        "partial",
        {"reranker": "reranker_partial"},
        "reranker_partial",
        id="rerank-partial",
    ),
]


@pytest.mark.integration
async def test_a_healthy_answer_logs_nothing_and_says_reranked(
    faulty: tuple[Faults, BackgroundStack],
) -> None:
    # Before the failure cases: a slow reranker there teaches the Retriever's
    # candidate sizing (services/retriever/rerank_sizing.py) a high cost per
    # candidate, and a healthy answer right after may rerank only a part.
    response, logged = await _search(faulty[1].retriever_addr)
    body = response.json()
    assert body["degraded"] == []
    assert (body["rerank"]["code"], body["rerank"]["used"]) == ("reranked", True)
    assert logged == []


@pytest.mark.integration
@pytest.mark.parametrize(("part", "mode", "degraded", "rerank"), FAULTS)
async def test_each_failure_is_a_code_and_its_words_go_to_the_log(
    faulty: tuple[Faults, BackgroundStack],
    part: str,
    mode: str,
    degraded: dict[str, str],
    rerank: str,
) -> None:
    faults, stack = faulty
    faults.set(part, mode)
    response, logged = await _search(stack.retriever_addr)
    body = response.json()

    codes = {d["component"]: d["code"] for d in body["degraded"]}
    assert codes == degraded
    assert body["rerank"]["code"] == rerank
    assert body["rerank"]["message"] == MESSAGES[ReasonCode(rerank)]
    for item in [*body["degraded"], body["rerank"]]:
        assert item["message"] == MESSAGES[ReasonCode(item["code"])]
        assert "reason" not in item
    assert "model" not in body["rerank"]
    assert all("error" not in channel for channel in body["debug"]["channels"])

    assert len(logged) == 1  # one line, naming the request
    line = logged[0]
    assert line["request_id"] == body["request_id"] == response.headers["x-request-id"]
    reasons = [d["reason"] for d in line["degraded"]]
    assert reasons and all(reasons)
    for reason in reasons:
        assert reason not in response.text
        assert reason.split(":", 1)[-1].strip() not in response.text


@pytest.mark.integration
async def test_trusted_debug_answers_carry_the_retrievers_words(
    faulty: tuple[Faults, BackgroundStack],
) -> None:
    faults, stack = faulty
    faults.set("lexical", RAISE)
    faults.set("reranker", "partial")
    trusted, logged = await _search(stack.retriever_addr, gateway_debug_reasons=True)
    not_asked, _ = await _search(stack.retriever_addr, debug=False, gateway_debug_reasons=True)
    no_debug, _ = await _search(
        stack.retriever_addr, gateway_debug_reasons=True, gateway_allow_debug=False
    )

    body = trusted.json()
    raw = {d["component"]: d["reason"] for d in logged[0]["degraded"]}
    assert {d["component"]: d["reason"] for d in body["degraded"]} == raw
    assert "injected failure" in raw["lexical"]
    assert body["rerank"]["reason"] == logged[0]["rerank_reason"]
    assert body["rerank"]["model"]
    lexical = next(c for c in body["debug"]["channels"] if c["channel"] == "lexical")
    assert "injected failure" in lexical["error"]
    for response in (not_asked, no_debug):
        data = response.json()
        assert {d["code"] for d in data["degraded"]} == {"lexical_error", "reranker_partial"}
        assert "injected failure" not in response.text
        assert "reason" not in data["rerank"] and "model" not in data["rerank"]


@pytest.mark.integration
async def test_an_unreachable_reranker_does_not_reveal_its_address(
    embedded_stack: BackgroundStack,
) -> None:
    """The shared stack's reranker address is a closed loopback port."""
    response, logged = await _search(embedded_stack.retriever_addr)
    body = response.json()
    assert body["degraded"] == [
        {
            "component": "reranker",
            "code": "reranker_unavailable",
            "message": MESSAGES[ReasonCode.RERANKER_UNAVAILABLE],
        }
    ]
    assert body["rerank"]["code"] == "reranker_unavailable"
    assert "127.0.0.1" not in response.text and "UNAVAILABLE" not in response.text
    # The operator's log still has the Retriever's words (at DEBUG).
    assert logged[0]["rerank_reason"].startswith("reranker not serving")


def _degradation(component: str, reason: str) -> pb.Degradation:
    return pb.Degradation(component=component, reason=reason)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("component", "reason", "code"),
    [
        ("vector", "timeout: timed out after 300 ms", "vector_timeout"),
        ("lexical", "error: StoreUnavailable: opensearch at 10.0.0.5:9200", "lexical_error"),
        ("lexical", "skipped: no time left in the deadline", "lexical_skipped"),
        (
            "embedding",
            "error: ModelLoadError: not in the cache (HF_HUB_OFFLINE=1)",
            "embedding_error",
        ),
        ("vector", "a reason in a new format", "vector_error"),  # unknown: the generic code
        ("qdrant", "error: refused", "other_error"),  # unknown component
    ],
)
def test_channel_codes_follow_the_retrievers_status_prefix(
    component: str, reason: str, code: str
) -> None:
    assert degradation_code(_degradation(component, reason), pb.RerankOutcome()) == code


@pytest.mark.unit
@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (pb.RerankOutcome(used=True, candidates=5, reranked=5), "reranked"),
        (
            pb.RerankOutcome(
                used=True,
                candidates=4,
                reranked=4,
                reason="fused order kept: the reranker's best score beats the first "
                "candidate's by 2.10, less than its gate 10",
            ),
            "reranked_order_kept",
        ),
        (pb.RerankOutcome(reason="disabled by request"), "reranker_off"),
        (pb.RerankOutcome(reason="no reranker configured"), "reranker_not_configured"),
        (pb.RerankOutcome(reason="no candidates"), "no_candidates"),
        (pb.RerankOutcome(reason="something new"), "reranker_not_used"),
        (
            pb.RerankOutcome(fallback=True, reason="deadline too short to rerank (3 ms left)"),
            "reranker_skipped",
        ),
        (
            pb.RerankOutcome(fallback=True, reason="reranker UNAUTHENTICATED: no token"),
            "reranker_error",
        ),
        (
            pb.RerankOutcome(fallback=True, reason="partial: 0 of 5 scored (deadline); rest"),
            "reranker_timeout",
        ),
        (pb.RerankOutcome(fallback=True, reason="unusable reranker reply: NaN"), "reranker_error"),
    ],
)
def test_rerank_codes(outcome: pb.RerankOutcome, code: str) -> None:
    assert rerank_code(outcome) == code
