"""Every response says `X-Content-Type-Options: nosniff`, once: API answers,
errors from every layer (origin gate, handlers, routing) and files."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.support import (
    ALLOWED_ORIGIN,
    FOREIGN_ORIGIN,
    SEARCH,
    RetrieverServer,
    gateway_settings,
    serve_gateway,
)

pytestmark = pytest.mark.integration

REQUESTS = [
    pytest.param("POST", "/v1/search", ALLOWED_ORIGIN, SEARCH, 200, id="search"),
    pytest.param("POST", "/v1/search", ALLOWED_ORIGIN, {"query": ""}, 422, id="invalid"),
    pytest.param("POST", "/v1/search", ALLOWED_ORIGIN, None, 415, id="no-json"),
    pytest.param("POST", "/v1/search", FOREIGN_ORIGIN, SEARCH, 403, id="origin-refused"),
    pytest.param("OPTIONS", "/v1/search", ALLOWED_ORIGIN, None, 204, id="preflight"),
    pytest.param("GET", "/v1/search", ALLOWED_ORIGIN, None, 405, id="wrong-method"),
    pytest.param("GET", "/nope", None, None, 404, id="not-found"),
    # Not redirected: Starlette would build the Location from the Host header.
    pytest.param("POST", "/v1/search/", ALLOWED_ORIGIN, SEARCH, 404, id="trailing-slash"),
    pytest.param("HEAD", "/", None, None, 200, id="page-head"),
    pytest.param("GET", "/healthz", None, None, 200, id="healthz"),
    pytest.param("GET", "/readyz", None, None, 200, id="readyz"),
    pytest.param("HEAD", "/healthz", None, None, 200, id="healthz-head"),
    pytest.param("HEAD", "/readyz", None, None, 200, id="readyz-head"),
    pytest.param("GET", "/openapi.json", None, None, 200, id="openapi"),
    pytest.param("GET", "/", None, None, 200, id="page"),
    pytest.param("GET", "/widget.js", None, None, 200, id="widget"),
    pytest.param("GET", "/static/page.css", None, None, 200, id="static"),
]


@pytest.mark.parametrize(("method", "path", "origin", "body", "status"), REQUESTS)
async def test_every_response_says_nosniff_once(
    retriever: RetrieverServer,
    method: str,
    path: str,
    origin: str | None,
    body: object,
    status: int,
) -> None:
    headers = {"Origin": origin} if origin else {}
    if method == "OPTIONS":
        headers["Access-Control-Request-Method"] = "POST"
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        response = await client.request(method, f"{gw.url}{path}", json=body, headers=headers)
    assert response.status_code == status
    assert response.headers.get_list("x-content-type-options") == ["nosniff"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        pytest.param("GET", "/v1/search", "POST", id="search"),
        pytest.param("POST", "/healthz", "GET, HEAD", id="healthz"),
        pytest.param("DELETE", "/", "GET, HEAD", id="page"),
    ],
)
async def test_a_wrong_method_is_a_json_405_that_names_the_allowed_ones(
    retriever: RetrieverServer, method: str, path: str, allowed: str
) -> None:
    """RFC 9110: a 405 carries `Allow`; a client (or a person with curl) can
    tell what the path takes without reading the docs."""
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        response = await client.request(
            method, f"{gw.url}{path}", headers={"Origin": ALLOWED_ORIGIN}
        )
    assert response.status_code == 405
    assert sorted(response.headers["allow"].split(", ")) == sorted(allowed.split(", "))
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert response.headers["cache-control"] == "no-store"


async def test_the_schema_lists_each_probe_once_as_get(retriever: RetrieverServer) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        paths = (await client.get(f"{gw.url}/openapi.json")).json()["paths"]
        head = await client.head(f"{gw.url}/readyz")
    assert {path: sorted(paths[path]) for path in ("/healthz", "/readyz")} == {
        "/healthz": ["get"],
        "/readyz": ["get"],
    }
    assert head.status_code == 200 and head.content == b""


async def test_a_head_over_the_limit_is_a_json_431_that_names_it(
    retriever: RetrieverServer,
) -> None:
    """A head that arrives whole in one read is bounded like one still
    arriving (h11's bound): before, ~100 KB of headers were served."""
    settings = gateway_settings(retriever.addr, gateway_max_head_bytes=8192)
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        small = await client.get(f"{gw.url}/healthz", headers={"X-Note": "a" * 6000})
        large = await client.get(f"{gw.url}/healthz", headers={"X-Note": "a" * 9000})
    assert small.status_code == 200
    assert large.status_code == 431
    error = large.json()["error"]
    assert error["code"] == "headers_too_large"
    assert "exceeds the limit of 8192" in error["message"]
    assert large.headers.get_list("x-content-type-options") == ["nosniff"]
    assert large.headers["x-request-id"] == error["request_id"]


@pytest.mark.parametrize("path", ["/static/index.html", "/static/./index.html", "/static/page.css"])
async def test_the_page_through_the_static_mount_has_the_pages_headers(
    retriever: RetrieverServer, path: str
) -> None:
    """Probe of 2026-12-06: `/static/index.html` is the page too, and was
    served without its Content-Security-Policy (frame-ancestors 'none') or
    Referrer-Policy, so any site could frame it."""
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        page = await client.get(f"{gw.url}/")
        static = await client.get(f"{gw.url}{path}")
    assert static.status_code == 200
    for header in ("content-security-policy", "referrer-policy"):
        assert static.headers.get_list(header) == page.headers.get_list(header)
    assert "frame-ancestors 'none'" in static.headers["content-security-policy"]
