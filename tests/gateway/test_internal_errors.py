"""An unexpected failure inside the gateway still answers like the API:
JSON body with code `internal`, the CORS headers the browser needs to read
it, and the request id to trace it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.app import create_app
from rag_client import AsyncRetrieverClient
from tests.gateway.support import ALLOWED_ORIGIN, RetrieverServer, gateway_settings, serve_asgi

pytestmark = pytest.mark.integration


class _BrokenClient(AsyncRetrieverClient):
    """Fault injection: a Retriever client whose call fails with a bug, not an RPC error."""

    async def retrieve(self, query: Any, *, deadline: Any = None, **options: Any) -> Any:
        raise RuntimeError("bug in the gateway's client code")


async def test_unexpected_error_is_a_json_500_with_cors_and_request_id(
    retriever: RetrieverServer,
) -> None:
    app = create_app(gateway_settings(retriever.addr), retriever_client_factory=_BrokenClient)
    headers = {"Origin": ALLOWED_ORIGIN, "X-Request-Id": "trace-me-12345"}
    async with serve_asgi(app) as (url, _server), httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{url}/v1/search", json={"query": "ports"}, headers=headers)
        healthy = await client.get(f"{url}/healthz")

    assert response.status_code == 500
    body = response.json()["error"]
    assert body["code"] == "internal"
    assert body["request_id"] == "trace-me-12345"
    assert "bug in" not in response.text  # internals stay in the log, not the response
    assert response.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert response.headers["x-request-id"] == "trace-me-12345"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert healthy.status_code == 200  # the process keeps serving
