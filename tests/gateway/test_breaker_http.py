"""The breaker counts only the Retriever's health (gateway/breaker.py), and
no non-finite number reaches JSON: through real HTTP in front of the scripted
Retriever (a labelled fault injector: `fail_for_query` fails only the requests
of one query, so one client's requests fail while another's succeed)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import httpx
import pytest

from gateway.settings import GatewaySettings
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from tests.gateway.support import (
    ALLOWED_ORIGIN,
    RetrieverServer,
    canned_response,
    gateway_settings,
    serve_gateway,
)

pytestmark = pytest.mark.integration

HOSTILE, LEGIT = "203.0.113.9", "198.51.100.7"
BOOM = "a query the fault injector fails"
QUERY = "which port does the gateway listen on"


def _settings(addr: str, **overrides: Any) -> GatewaySettings:
    # Loopback is the trusted proxy, so X-Forwarded-For names each test client.
    return gateway_settings(addr, gateway_forwarded_allow_ips=["127.0.0.1/32"], **overrides)


async def _search(client: httpx.AsyncClient, url: str, who: str, query: str) -> httpx.Response:
    headers = {"Origin": ALLOWED_ORIGIN, "X-Forwarded-For": who}
    return await client.post(f"{url}/v1/search", json={"query": query}, headers=headers)


async def test_a_hundred_failing_requests_from_one_client_leave_search_open_for_others(
    retriever: RetrieverServer,
) -> None:
    retriever.servicer.fail_for_query[BOOM] = grpc.StatusCode.INTERNAL
    settings = _settings(retriever.addr, gateway_breaker_fail_max=3, gateway_breaker_reset_s=60)
    hostile, legit = [], []
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        for _ in range(100):
            hostile.append(await _search(client, gw.url, HOSTILE, BOOM))
            legit.append(await _search(client, gw.url, LEGIT, QUERY))
        metrics = (await client.get(gw.metrics_url)).text
    assert [r.status_code for r in legit] == [200] * 100
    assert [r.status_code for r in hostile[:3]] == [502] * 3
    paused = hostile[3:]
    assert {(r.status_code, r.json()["error"]["code"]) for r in paused} == {(503, "breaker_open")}
    assert all(int(r.headers["retry-after"]) >= 1 for r in paused)
    assert retriever.servicer.calls == 3 + 100  # the paused client reached nothing
    assert 'gateway_breaker_state{state="closed"} 1.0' in metrics


async def test_internal_errors_met_by_several_clients_open_the_breaker(
    retriever: RetrieverServer,
) -> None:
    retriever.servicer.fail_with = grpc.StatusCode.INTERNAL
    settings = _settings(retriever.addr, gateway_breaker_fail_max=3, gateway_breaker_reset_s=60)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        failures = [await _search(client, gw.url, f"192.0.2.{i}", QUERY) for i in (1, 2, 3)]
        retriever.servicer.fail_with = None
        refused = await _search(client, gw.url, LEGIT, QUERY)
    assert [r.status_code for r in failures] == [502, 502, 502]
    assert (refused.status_code, refused.json()["error"]["code"]) == (503, "breaker_open")
    assert retriever.servicer.calls == 3


async def test_a_non_finite_number_from_the_retriever_is_never_sent_as_json(
    retriever: RetrieverServer,
) -> None:
    """Defence in depth (issue 37, finding 2 answered 500 with a JSON encoder
    error): a controlled 502 naming no number, and nothing counted against
    anyone."""
    reply = canned_response(pb.RetrieveRequest(query=QUERY))
    reply.hits[0].rerank_score = float("nan")
    reply.hits[-1].score = float("inf")
    retriever.servicer.reply_with = reply
    settings = _settings(retriever.addr, gateway_breaker_fail_max=1)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        refused = [await _search(client, gw.url, HOSTILE, QUERY) for _ in range(3)]
        retriever.servicer.reply_with = None
        after = await _search(client, gw.url, LEGIT, QUERY)
    assert {r.status_code for r in refused} == {502}
    assert {r.json()["error"]["code"] for r in refused} == {"upstream_unavailable"}
    assert after.status_code == 200


async def test_searches_the_open_breaker_refuses_spend_no_daily_budget(
    retriever: RetrieverServer,
) -> None:
    # The probe's finding: with the Retriever down, 10,000 refused searches
    # spent the day's 10,000 and search stayed off after it came back.
    retriever.servicer.fail_with = grpc.StatusCode.UNAVAILABLE
    settings = _settings(
        retriever.addr,
        gateway_breaker_fail_max=2,
        gateway_breaker_reset_s=2.0,
        gateway_daily_budget=5,
        gateway_daily_budget_client_share=1,
    )
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        failed = [await _search(client, gw.url, f"192.0.2.{i}", QUERY) for i in (1, 2)]
        refused = [await _search(client, gw.url, f"192.0.2.{i}", QUERY) for i in range(3, 23)]
        retriever.servicer.fail_with = None
        await asyncio.sleep(2.1)  # the circuit's reset: the next search is its probe
        recovered = [await _search(client, gw.url, LEGIT, QUERY) for _ in range(3)]
        spent = await _search(client, gw.url, LEGIT, QUERY)
    assert [r.status_code for r in failed] == [502, 502]
    assert {r.json()["error"]["code"] for r in refused} == {"breaker_open"}
    assert [r.status_code for r in recovered] == [200, 200, 200]  # 2 + 3 of the budget's 5
    assert (spent.status_code, spent.json()["error"]["code"]) == (429, "budget_exhausted")


async def test_readyz_saying_ready_is_not_followed_by_breaker_refusals(
    retriever: RetrieverServer,
) -> None:
    """Probe of 2026-12-06: the Retriever came back, /readyz said ready, and
    every search was refused `breaker_open` until the reset ran out; a
    balancer sent its traffic to an instance that turned it all away."""
    retriever.servicer.fail_with = grpc.StatusCode.UNAVAILABLE
    settings = _settings(retriever.addr, gateway_breaker_fail_max=2, gateway_breaker_reset_s=60)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        failed = [await _search(client, gw.url, LEGIT, QUERY) for _ in range(3)]
        retriever.servicer.fail_with = None  # the Retriever is back
        ready = await client.get(f"{gw.url}/readyz")
        served = [await _search(client, gw.url, LEGIT, QUERY) for _ in range(2)]
    assert [r.status_code for r in failed] == [502, 502, 503]  # the third: breaker_open
    assert ready.status_code == 200
    assert [r.status_code for r in served] == [200, 200]  # the probe closed the circuit
