"""Two gateway instances sharing one real redis-server hold the same limits,
budget and breaker; when Redis goes away the gates fail closed."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from tests.gateway.support import (
    ALLOWED_ORIGIN,
    RedisServer,
    RetrieverServer,
    RunningGateway,
    gateway_settings,
    run_redis_server,
    serve_gateway,
)

pytestmark = pytest.mark.integration


@asynccontextmanager
async def two_instances(
    retriever: RetrieverServer, redis_url: str, **overrides: Any
) -> AsyncIterator[tuple[RunningGateway, RunningGateway]]:
    settings = gateway_settings(
        retriever.addr,
        gateway_redis_url=redis_url,
        gateway_redis_namespace=f"test-{uuid.uuid4().hex[:8]}",  # isolates each test's keys
        **overrides,
    )
    async with serve_gateway(settings) as first, serve_gateway(settings) as second:
        yield first, second


async def _search(
    gateway: RunningGateway, query: str = "rate limits", client_ip: str = ""
) -> httpx.Response:
    headers = {"Origin": ALLOWED_ORIGIN}
    if client_ip:
        headers["X-Forwarded-For"] = client_ip
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(f"{gateway.url}/v1/search", json={"query": query}, headers=headers)


async def _codes(*gateways: RunningGateway) -> list[int]:
    return [(await _search(gw)).status_code for gw in gateways]


async def test_rate_limit_is_shared_across_instances(
    retriever: RetrieverServer, redis_server: RedisServer
) -> None:
    async with two_instances(retriever, redis_server.url, gateway_rate_limit="4/hour") as (a, b):
        allowed = await _codes(a, b, a, b)
        limited = [await _search(a), await _search(b)]
    assert allowed == [200, 200, 200, 200]
    assert [r.status_code for r in limited] == [429, 429]
    assert all(r.json()["error"]["code"] == "rate_limited" for r in limited)
    assert all(int(r.headers["retry-after"]) >= 1 for r in limited)
    assert retriever.servicer.calls == 4


async def test_daily_budget_is_shared_across_instances(
    retriever: RetrieverServer, redis_server: RedisServer
) -> None:
    async with two_instances(
        retriever, redis_server.url, gateway_daily_budget=3, gateway_daily_budget_client_share=1
    ) as (a, b):
        spent = await _codes(a, b, a)
        exhausted = await _search(b)
    assert spent == [200, 200, 200]
    assert exhausted.status_code == 429
    assert exhausted.json()["error"]["code"] == "budget_exhausted"
    assert retriever.servicer.calls == 3


async def test_breaker_state_is_shared_across_instances(
    retriever: RetrieverServer, redis_server: RedisServer
) -> None:
    retriever.servicer.fail_with = grpc.StatusCode.UNAVAILABLE
    # pybreaker's Redis storage keeps the opening time in whole seconds, so the
    # circuit stays open between reset_s - 1 and reset_s seconds; 4 s leaves a
    # loaded machine room to make the calls that must see it open.
    overrides = {"gateway_breaker_fail_max": 2, "gateway_breaker_reset_s": 4.0}
    async with two_instances(retriever, redis_server.url, **overrides) as (a, b):
        failures = await _codes(a, b)  # one failure seen by each instance opens it for both
        open_codes = [(await _search(gw)).json()["error"]["code"] for gw in (a, b)]
        calls_while_open = retriever.servicer.calls
        retriever.servicer.fail_with = None
        await asyncio.sleep(4.2)
        recovered = await _codes(b, a)
    assert failures == [502, 502]
    assert open_codes == ["breaker_open", "breaker_open"]
    assert calls_while_open == 2
    assert recovered == [200, 200]


async def test_one_clients_strikes_are_shared_and_leave_others_open(
    retriever: RetrieverServer, redis_server: RedisServer
) -> None:
    """The fault injector fails one query INTERNAL: its client is paused on
    both instances after fail_max between them; others still search."""
    retriever.servicer.fail_for_query["boom"] = grpc.StatusCode.INTERNAL
    overrides = {
        "gateway_breaker_fail_max": 2,
        "gateway_breaker_reset_s": 60.0,
        "gateway_forwarded_allow_ips": ["127.0.0.1/32"],
    }
    async with two_instances(retriever, redis_server.url, **overrides) as (a, b):
        hostile = [await _search(gw, "boom", "203.0.113.9") for gw in (a, b, a, b)]
        legit = [await _search(gw, "rate limits", "198.51.100.7") for gw in (a, b)]
    assert [r.status_code for r in hostile] == [502, 502, 503, 503]
    assert {r.json()["error"]["code"] for r in hostile[2:]} == {"breaker_open"}
    assert [r.status_code for r in legit] == [200, 200]
    assert retriever.servicer.calls == 4


async def test_gates_fail_closed_when_redis_goes_away(
    retriever: RetrieverServer, tmp_path: Path
) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian package `redis-server`)")
    with run_redis_server(tmp_path) as redis:
        async with two_instances(retriever, redis.url) as (a, _b):
            before = await _search(a)
            redis.process.terminate()
            await asyncio.to_thread(redis.process.wait, 10)
            after = await _search(a)
            async with httpx.AsyncClient() as client:
                ready = await client.get(f"{a.url}/readyz")
    assert before.status_code == 200
    assert after.status_code == 503
    assert after.json()["error"]["code"] == "limiter_unavailable"
    assert retriever.servicer.calls == 1  # the refused request never went downstream
    assert ready.status_code == 503
