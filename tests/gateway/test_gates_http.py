"""Every public gate, driven through real HTTP (uvicorn on loopback) in front of
a real gRPC server running the scripted Retriever."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import httpx
import pytest

from gateway.readiness import READINESS_TTL_S
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from tests.gateway.support import (
    ALLOWED_ORIGIN,
    FOREIGN_ORIGIN,
    SEARCH,
    RetrieverServer,
    gateway_settings,
    serve_gateway,
)

pytestmark = pytest.mark.integration

# Long enough that a loaded machine still makes the call that must find the
# breaker open before it half-opens (0.5 s was not, on a 2-core CI run).
BREAKER_RESET_S = 3.0


def _headers(origin: str | None = ALLOWED_ORIGIN) -> dict[str, str]:
    return {"Origin": origin} if origin else {}


async def _post(
    url: str, body: Any = SEARCH, origin: str | None = ALLOWED_ORIGIN
) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(f"{url}/v1/search", json=body, headers=_headers(origin))


def _error_code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json")
    return str(response.json()["error"]["code"])


async def test_public_switch_off_answers_controlled_503_and_calls_nothing(
    retriever: RetrieverServer,
) -> None:
    settings = gateway_settings(
        retriever.addr, gateway_public_enabled=False, gateway_disabled_message="Closed for now."
    )
    async with serve_gateway(settings) as gw:
        response = await _post(gw.url)
    assert response.status_code == 503
    assert _error_code(response) == "public_disabled"
    assert response.json()["error"]["message"] == "Closed for now."
    # The allowed page can read the message: CORS headers ride on the refusal.
    assert response.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert retriever.servicer.calls == 0


async def test_allowed_origin_gets_results_and_cors_headers(retriever: RetrieverServer) -> None:
    body = {
        "query": "  which   port does the gateway listen on ",
        "top_k": 3,
        "page_url": "https://docs.example/deployment#ports",
        "scope": {"scope_id": "docs", "locale": "en", "metadata": {"team": "ops"}},
        "debug": True,
    }
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        response = await _post(gw.url, body)
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "Retry-After" in response.headers["access-control-expose-headers"]
    data = response.json()
    assert data["hits"][0]["title"] == "Deployment"
    assert data["hits"][0]["citation"] == 1
    assert data["citations"][0]["url"] == "https://docs.example/deployment"
    assert data["evidence"]["text"].startswith("[1] Deployment")
    assert {c["channel"] for c in data["hits"][0]["channels"]} == {"vector", "lexical"}
    assert data["debug"]["channels"][0]["status"] == "ok"
    assert data["rerank"]["used"] is True
    sent = retriever.servicer.requests[0]
    assert sent.query == "which port does the gateway listen on"
    assert sent.top_k == 3
    assert sent.page_url == "https://docs.example/deployment"  # fragment dropped
    assert (sent.filter.scope_id, sent.filter.locale) == ("docs", "en")
    assert dict(sent.filter.metadata) == {"team": "ops"}
    assert sent.debug is True


async def test_request_deadline_is_passed_to_retrieve(retriever: RetrieverServer) -> None:
    settings = gateway_settings(retriever.addr, gateway_request_deadline_s=1.5)
    async with serve_gateway(settings) as gw:
        assert (await _post(gw.url)).status_code == 200
    remaining = retriever.servicer.time_remaining[0]
    assert remaining is not None and 0 < remaining <= 1.5


async def test_slow_retriever_answers_504_at_the_deadline(retriever: RetrieverServer) -> None:
    retriever.servicer.delay_s = 3.0
    settings = gateway_settings(retriever.addr, gateway_request_deadline_s=0.4)
    async with serve_gateway(settings) as gw:
        started = time.perf_counter()
        response = await _post(gw.url)
        elapsed = time.perf_counter() - started
    assert response.status_code == 504
    assert _error_code(response) == "upstream_timeout"
    assert elapsed < 3.0  # answered at the deadline, not when the Retriever finished


async def test_this_page_mode_restricts_to_the_page(retriever: RetrieverServer) -> None:
    body = {
        "query": "daily budget",
        "page_url": "https://docs.example/rate-limits",
        "this_page": True,
    }
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        response = await _post(gw.url, body)
        missing = await _post(gw.url, {"query": "budget", "this_page": True})
    assert response.status_code == 200
    sent = retriever.servicer.requests[0]
    assert sent.intent == pb.INTENT_CURRENT_PAGE
    assert sent.page_url == "https://docs.example/rate-limits"
    assert {h["url"] for h in response.json()["hits"]} == {"https://docs.example/rate-limits"}
    assert missing.status_code == 422 and _error_code(missing) == "invalid_request"


async def test_this_page_mode_says_so_when_nothing_matches(retriever: RetrieverServer) -> None:
    body = {"query": "ports", "page_url": "https://docs.example/unknown", "this_page": True}
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        data = (await _post(gw.url, body)).json()
    assert data["hits"] == []
    assert "this page" in data["message"]


async def test_foreign_origin_is_rejected_before_any_downstream_call(
    retriever: RetrieverServer,
) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        response = await _post(gw.url, origin=FOREIGN_ORIGIN)
        preflight = await client.options(
            f"{gw.url}/v1/search",
            headers={"Origin": FOREIGN_ORIGIN, "Access-Control-Request-Method": "POST"},
        )
    assert response.status_code == 403
    assert _error_code(response) == "origin_not_allowed"
    assert "access-control-allow-origin" not in response.headers
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    assert retriever.servicer.calls == 0


async def test_allowed_origin_preflight_gets_correct_headers(retriever: RetrieverServer) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        response = await client.options(
            f"{gw.url}/v1/search",
            headers={
                "Origin": ALLOWED_ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "content-type" in response.headers["access-control-allow-headers"].lower()
    assert int(response.headers["access-control-max-age"]) > 0
    assert response.headers["vary"] == "Origin"
    assert retriever.servicer.calls == 0


async def test_missing_origin_is_refused_unless_allowed(retriever: RetrieverServer) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        refused = await _post(gw.url, origin=None)
    permissive = gateway_settings(retriever.addr, gateway_allow_missing_origin=True)
    async with serve_gateway(permissive) as gw:
        accepted = await _post(gw.url, origin=None)
    assert refused.status_code == 403
    assert accepted.status_code == 200
    assert retriever.servicer.calls == 1


async def test_the_gateways_own_origin_may_call_it(retriever: RetrieverServer) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        same = await _post(gw.url, origin=gw.url)
    strict = gateway_settings(retriever.addr, gateway_allow_same_origin=False)
    async with serve_gateway(strict) as gw:
        refused = await _post(gw.url, origin=gw.url)
    assert same.status_code == 200
    assert refused.status_code == 403


async def test_rate_limit_answers_429_with_retry_after_and_no_downstream_call(
    retriever: RetrieverServer,
) -> None:
    settings = gateway_settings(retriever.addr, gateway_rate_limit="3/hour")
    async with serve_gateway(settings) as gw:
        statuses = [(await _post(gw.url)).status_code for _ in range(3)]
        limited = await _post(gw.url)
    assert statuses == [200, 200, 200]
    assert limited.status_code == 429
    assert _error_code(limited) == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 3600
    assert retriever.servicer.calls == 3


async def test_burst_and_sustained_limits_both_hold(retriever: RetrieverServer) -> None:
    # A burst window of 10 s, not 1 s: three calls on a loaded 2-core machine
    # once spanned two one-second windows.
    settings = gateway_settings(retriever.addr, gateway_rate_limit="2/10 seconds;3/hour")
    async with serve_gateway(settings) as gw:
        # Sliding-window counters use windows aligned to the clock: start the
        # burst early in a window so that all of it falls into one.
        while time.time() % 10 > 1.0:
            await asyncio.sleep(0.05)
        burst = [(await _post(gw.url)).status_code for _ in range(3)]
        await asyncio.sleep(10.5)  # the burst window has passed, the hour has not
        after = [(await _post(gw.url)).status_code for _ in range(2)]
    assert burst == [200, 200, 429]
    assert after == [200, 429]
    assert retriever.servicer.calls == 3


async def test_daily_budget_answers_429_and_stops_downstream_calls(
    retriever: RetrieverServer,
) -> None:
    settings = gateway_settings(
        retriever.addr, gateway_daily_budget=2, gateway_daily_budget_client_share=1
    )
    async with serve_gateway(settings) as gw:
        invalid = await _post(gw.url, {"query": ""})  # refused before spending the budget
        spent = [(await _post(gw.url)).status_code for _ in range(2)]
        exhausted = await _post(gw.url)
    assert invalid.status_code == 422
    assert spent == [200, 200]
    assert exhausted.status_code == 429
    assert _error_code(exhausted) == "budget_exhausted"
    assert 1 <= int(exhausted.headers["retry-after"]) <= 86_400
    assert retriever.servicer.calls == 2


async def test_one_client_cannot_spend_the_whole_daily_budget(retriever: RetrieverServer) -> None:
    """Probe of 2026-12-06: one address inside its rate limit spent the day's
    budget and every other client got 429 until midnight. By default a client
    spends at most a quarter of it."""
    settings = gateway_settings(
        retriever.addr, gateway_daily_budget=8, gateway_forwarded_allow_ips=["127.0.0.1/32"]
    )

    async def search(who: str) -> httpx.Response:
        headers = {**_headers(), "X-Forwarded-For": who}
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(f"{gw.url}/v1/search", json=SEARCH, headers=headers)

    async with serve_gateway(settings) as gw:
        greedy = [(await search("203.0.113.9")).status_code for _ in range(3)]
        refused = await search("203.0.113.9")
        other = await search("198.51.100.7")
    assert greedy == [200, 200, 429]  # a quarter of 8
    assert _error_code(refused) == "budget_exhausted"
    assert "this client's share of today's search budget (2)" in refused.json()["error"]["message"]
    assert other.status_code == 200
    assert retriever.servicer.calls == 3


async def test_breaker_opens_after_failures_and_recovers(retriever: RetrieverServer) -> None:
    retriever.servicer.fail_with = grpc.StatusCode.UNAVAILABLE
    settings = gateway_settings(
        retriever.addr, gateway_breaker_fail_max=3, gateway_breaker_reset_s=BREAKER_RESET_S
    )
    async with serve_gateway(settings) as gw:
        failures = [(await _post(gw.url)).status_code for _ in range(3)]
        refused = await _post(gw.url)
        calls_while_open = retriever.servicer.calls
        retriever.servicer.fail_with = None
        await asyncio.sleep(BREAKER_RESET_S + 0.2)
        probe = await _post(gw.url)
        after = await _post(gw.url)
        metrics = (await httpx.AsyncClient().get(gw.metrics_url)).text
    assert failures == [502, 502, 502]
    assert refused.status_code == 503
    assert _error_code(refused) == "breaker_open"
    assert int(refused.headers["retry-after"]) >= 1
    assert calls_while_open == 3  # the open breaker called nothing
    assert (probe.status_code, after.status_code) == (200, 200)
    assert 'gateway_breaker_state{state="closed"} 1.0' in metrics


async def test_failed_probe_opens_the_breaker_again(retriever: RetrieverServer) -> None:
    retriever.servicer.fail_with = grpc.StatusCode.UNAVAILABLE
    settings = gateway_settings(
        retriever.addr, gateway_breaker_fail_max=2, gateway_breaker_reset_s=BREAKER_RESET_S
    )
    async with serve_gateway(settings) as gw:
        for _ in range(2):
            await _post(gw.url)
        await asyncio.sleep(BREAKER_RESET_S + 0.2)
        probe = await _post(gw.url)
        refused = await _post(gw.url)
    assert probe.status_code == 502
    assert _error_code(refused) == "breaker_open"
    assert retriever.servicer.calls == 3


async def test_requests_the_retriever_rejects_do_not_open_the_breaker(
    retriever: RetrieverServer,
) -> None:
    retriever.servicer.fail_with = grpc.StatusCode.INVALID_ARGUMENT
    settings = gateway_settings(retriever.addr, gateway_breaker_fail_max=2)
    async with serve_gateway(settings) as gw:
        responses = [await _post(gw.url) for _ in range(4)]
    assert {r.status_code for r in responses} == {400}
    assert {_error_code(r) for r in responses} == {"upstream_rejected"}
    assert retriever.servicer.calls == 4


async def test_metrics_count_outcomes_and_latency(retriever: RetrieverServer) -> None:
    settings = gateway_settings(retriever.addr, gateway_rate_limit="2/hour")
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        for _ in range(3):
            await _post(gw.url)
        await _post(gw.url, origin=FOREIGN_ORIGIN)
        text = (await client.get(gw.metrics_url)).text
    assert 'gateway_search_requests_total{outcome="allowed"} 2.0' in text
    assert 'gateway_search_requests_total{outcome="rate_limited"} 1.0' in text
    assert 'gateway_search_requests_total{outcome="origin_rejected"} 1.0' in text
    assert 'gateway_search_requests_total{outcome="budget_exhausted"} 0.0' in text
    assert 'gateway_search_requests_total{outcome="breaker_open"} 0.0' in text
    assert 'gateway_search_duration_seconds_count{outcome="allowed"} 2.0' in text
    assert 'gateway_retriever_calls_total{code="OK"} 2.0' in text


async def test_health_readiness_and_openapi(retriever: RetrieverServer) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        health = await client.get(f"{gw.url}/healthz")
        ready = await client.get(f"{gw.url}/readyz")
        await retriever.server.set_serving(False)
        try:
            await asyncio.sleep(READINESS_TTL_S + 0.1)  # /readyz asks once per TTL
            not_serving = await client.get(f"{gw.url}/readyz")
        finally:
            await retriever.server.set_serving(True)
        spec = (await client.get(f"{gw.url}/openapi.json")).json()
        missing = await client.get(f"{gw.url}/nope")
    assert health.json() == {"status": "ok"}
    assert ready.status_code == 200
    assert not_serving.status_code == 503 and not_serving.json()["status"] == "not_ready"
    operation = spec["paths"]["/v1/search"]["post"]
    assert (
        "query" in operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
    )
    assert {"200", "403", "429", "503"} <= set(operation["responses"])
    assert (missing.status_code, _error_code(missing)) == (404, "not_found")


async def test_not_ready_when_the_retriever_is_unreachable() -> None:
    from tests.gateway.support import free_port

    settings = gateway_settings(f"127.0.0.1:{free_port()}", gateway_readiness_timeout_s=0.3)
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        ready = await client.get(f"{gw.url}/readyz")
        search = await _post(gw.url)
    assert ready.status_code == 503
    assert (search.status_code, _error_code(search)) == (502, "upstream_unavailable")
