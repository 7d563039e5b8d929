"""Query text reaches the logs only when the retention setting allows it."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
import structlog

from gateway.querylog import QueryLogPolicy
from tests.gateway.support import ALLOWED_ORIGIN, RetrieverServer, gateway_settings, serve_gateway

SECRET_QUERY = "my account number 4242 and rate limits"


@pytest.mark.unit
def test_policy_without_retention_keeps_only_length_and_keyed_hash() -> None:
    policy = QueryLogPolicy("none")
    fields = policy.query_fields("hello world")
    assert set(fields) == {"query_chars", "query_hash"}
    assert fields["query_chars"] == 11
    assert fields["query_hash"] == policy.query_fields("hello world")["query_hash"]
    assert fields["query_hash"] != QueryLogPolicy("none").query_fields("hello world")["query_hash"]
    assert set(policy.client_fields("10.0.0.1")) == {"client_hash"}


@pytest.mark.unit
def test_policy_with_raw_retention_keeps_the_text() -> None:
    policy = QueryLogPolicy("raw")
    assert policy.query_fields("hello")["query"] == "hello"
    assert policy.client_fields("10.0.0.1") == {"client": "10.0.0.1"}


async def _logged_search(retriever_addr: str, retention: str) -> list[MutableMapping[str, Any]]:
    settings = gateway_settings(retriever_addr, gateway_query_log_retention=retention)
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        with structlog.testing.capture_logs() as logs:
            response = await client.post(
                f"{gw.url}/v1/search",
                json={"query": SECRET_QUERY},
                headers={"Origin": ALLOWED_ORIGIN},
            )
    assert response.status_code == 200
    return [entry for entry in logs if entry.get("event") == "search"]


@pytest.mark.integration
async def test_search_logs_leave_the_query_out_by_default(retriever: RetrieverServer) -> None:
    entries = await _logged_search(retriever.addr, "none")
    assert len(entries) == 1
    assert SECRET_QUERY not in repr(entries)
    assert entries[0]["query_chars"] == len(SECRET_QUERY)


@pytest.mark.integration
async def test_search_logs_keep_the_query_when_retention_allows(retriever: RetrieverServer) -> None:
    entries = await _logged_search(retriever.addr, "raw")
    assert entries[0]["query"] == SECRET_QUERY
