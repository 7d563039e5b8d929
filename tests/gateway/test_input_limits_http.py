"""Input bounds through real HTTP: body size, media type, JSON, schema, query
length and top_k each get a 4xx JSON error, and the Retriever sees nothing."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import httpx
import pytest

from tests.gateway.support import ALLOWED_ORIGIN, RetrieverServer, gateway_settings, serve_gateway
from tests.gateway.test_schema_rules import ACCEPTED, REFUSED

pytestmark = pytest.mark.integration


def _error_code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json")
    return str(response.json()["error"]["code"])


BAD_REQUESTS = [
    pytest.param(b"{not json", "application/json", 400, "invalid_json", id="malformed-json"),
    pytest.param(b"[1, 2]", "application/json", 400, "invalid_json", id="not-an-object"),
    pytest.param(b'{"query": "x"}', "text/plain", 415, "unsupported_media_type", id="media-type"),
    pytest.param(
        b'{"query": "' + b"a" * 300 + b'"}',
        "application/json",
        422,
        "query_too_long",
        id="query-too-long",
    ),
    pytest.param(b'{"query": "   "}', "application/json", 422, "invalid_request", id="empty-query"),
    pytest.param(
        b'{"query": "x", "top_k": 0}',
        "application/json",
        422,
        "top_k_out_of_range",
        id="top-k-zero",
    ),
    pytest.param(
        b'{"query": "x", "top_k": 11}',
        "application/json",
        422,
        "top_k_out_of_range",
        id="top-k-over-max",
    ),
    pytest.param(
        b'{"query": "x", "top_k": "5"}',
        "application/json",
        422,
        "invalid_request",
        id="top-k-string",
    ),
    pytest.param(
        b'{"query": "x", "sql": 1}', "application/json", 422, "invalid_request", id="unknown-field"
    ),
    pytest.param(b'{"query": 5}', "application/json", 422, "invalid_request", id="query-type"),
    pytest.param(
        b'{"query": "x", "scope": {"urls": ["' + b'u", "' * 30 + b'u"]}}',
        "application/json",
        422,
        "invalid_request",
        id="too-many-filter-values",
    ),
    pytest.param(
        b'{"query": "x", "query_language": "English"}',
        "application/json",
        422,
        "invalid_request",
        id="query-language-not-a-code",
    ),
    pytest.param(
        b'{"query": "x", "query_language": "' + b"en-abcd" * 6 + b'"}',
        "application/json",
        422,
        "invalid_request",
        id="query-language-too-long",
    ),
    pytest.param(
        b'{"query": "x", "query_language": 7}',
        "application/json",
        422,
        "invalid_request",
        id="query-language-type",
    ),
    pytest.param(
        b'{"query": "x", "scope": {"metadata": {"": "v"}}}',
        "application/json",
        422,
        "invalid_request",
        id="empty-metadata-key",
    ),
    pytest.param(
        b'{"query": "x", "scope": {"metadata": {"lang=en": "v"}}}',
        "application/json",
        422,
        "invalid_request",
        id="metadata-key-with-equals",
    ),
]


@pytest.mark.parametrize(("body", "content_type", "status", "code"), BAD_REQUESTS)
async def test_bad_input_gets_a_4xx_json_error_and_no_downstream_call(
    retriever: RetrieverServer, body: bytes, content_type: str, status: int, code: str
) -> None:
    settings = gateway_settings(retriever.addr, gateway_max_query_chars=200, gateway_max_top_k=10)
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        response = await client.post(
            f"{gw.url}/v1/search",
            content=body,
            headers={"Origin": ALLOWED_ORIGIN, "Content-Type": content_type},
        )
    assert (response.status_code, _error_code(response)) == (status, code)
    assert response.json()["error"]["request_id"] == response.headers["x-request-id"]
    assert retriever.servicer.calls == 0


async def test_oversized_body_is_refused_by_length_and_while_streaming(
    retriever: RetrieverServer,
) -> None:
    settings = gateway_settings(retriever.addr, gateway_max_body_bytes=1024)
    big = b'{"query": "' + b"a" * 4096 + b'"}'

    async def chunked() -> Any:
        for start in range(0, len(big), 512):
            yield big[start : start + 512]

    headers = {"Origin": ALLOWED_ORIGIN, "Content-Type": "application/json"}
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        declared = await client.post(f"{gw.url}/v1/search", content=big, headers=headers)
        streamed = await client.post(f"{gw.url}/v1/search", content=chunked(), headers=headers)
    assert "content-length" not in streamed.request.headers
    for response in (declared, streamed):
        assert (response.status_code, _error_code(response)) == (413, "body_too_large")
    assert retriever.servicer.calls == 0


async def test_a_bad_query_language_is_named_in_the_error(retriever: RetrieverServer) -> None:
    body = {"query": "ports", "query_language": "zh\n"}
    headers = {"Origin": ALLOWED_ORIGIN}
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        response = await client.post(f"{gw.url}/v1/search", json=body, headers=headers)
        accepted = await client.post(
            f"{gw.url}/v1/search", json={"query": "ports", "query_language": "zh"}, headers=headers
        )
    assert (response.status_code, _error_code(response)) == (422, "invalid_request")
    assert "query_language" in response.json()["error"]["message"]
    assert accepted.status_code == 200
    assert accepted.json()["query_language"] == "zh"
    assert [r.query_language for r in retriever.servicer.requests] == ["zh"]


# Once answered 200 with arbitrary hits, or (NUL) forwarded to the Retriever
# at the cost of a downstream call and a unit of the daily budget.
INVISIBLE_QUERIES = [
    "\u200c",
    "\u2061\u2062",
    "\ufe0f",
    "\U0001d173",
    "\u200b",
    "\x00",
    "\u0000 \u3000",
    "\u3000",
]


async def test_a_query_of_invisible_characters_is_empty_and_costs_nothing(
    retriever: RetrieverServer,
) -> None:
    settings = gateway_settings(
        retriever.addr, gateway_daily_budget=1, gateway_daily_budget_client_share=1
    )
    headers = {"Origin": ALLOWED_ORIGIN}
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        refused = [
            await client.post(f"{gw.url}/v1/search", json={"query": q}, headers=headers)
            for q in INVISIBLE_QUERIES
        ]
        assert retriever.servicer.calls == 0  # no downstream call
        accepted = await client.post(
            f"{gw.url}/v1/search", json={"query": "ports"}, headers=headers
        )  # the one unit of the budget is still there
    for response in refused:
        assert (response.status_code, _error_code(response)) == (422, "invalid_request")
        assert response.json()["error"]["message"].startswith("query: is empty")
    assert accepted.status_code == 200
    assert retriever.servicer.calls == 1


async def test_malformed_fields_are_refused_naming_them_and_cost_nothing(
    retriever: RetrieverServer,
) -> None:
    """The review's inputs (and the strict types around them) through real
    HTTP: each a 422 `invalid_request` naming the field, before the budget or
    the Retriever is spent; the well-formed ones reach the Retriever."""
    settings = gateway_settings(
        retriever.addr, gateway_daily_budget=len(ACCEPTED), gateway_daily_budget_client_share=1
    )
    headers = {"Origin": ALLOWED_ORIGIN, "Content-Type": "application/json"}
    async with serve_gateway(settings) as gw, httpx.AsyncClient() as client:
        refused = [
            (
                field,
                phrase,
                await client.post(f"{gw.url}/v1/search", content=_json(body), headers=headers),
            )
            for body, field, phrase in [
                *(({"query": "ports", **f}, field, phrase) for f, field, phrase in REFUSED),
                *(({"query": q}, "query", "no letter, digit or symbol") for q in NO_TERM),
            ]
        ]
        assert retriever.servicer.calls == 0
        accepted = [
            await client.post(
                f"{gw.url}/v1/search", content=_json({"query": "ports", **f}), headers=headers
            )
            for f in ACCEPTED
        ]
    for field, phrase, response in refused:
        assert (response.status_code, _error_code(response)) == (422, "invalid_request")
        message = response.json()["error"]["message"]
        assert message.startswith(field) and phrase in message, message
    assert [r.status_code for r in accepted] == [200] * len(ACCEPTED)
    assert retriever.servicer.calls == len(ACCEPTED)


def _json(body: dict[str, Any]) -> bytes:
    """`body` as JSON, an infinite float as the literal 1e999 (valid JSON
    that Python's parser reads as inf)."""
    return json.dumps(body, allow_nan=True).replace("Infinity", "1e999").encode()


# Once 200 with ten arbitrary hits: no letter, digit or symbol.
NO_TERM = ["\u0301\u0302", "\u2800", "...", "?!"]


async def test_a_client_hanging_up_mid_body_is_not_an_internal_error(
    retriever: RetrieverServer,
) -> None:
    """A body cut short by the client (Content-Length 1000, 10 bytes sent,
    connection closed) was an unhandled ClientDisconnect: an ERROR traceback
    and outcome `internal`, which the RagGatewayUpstreamErrors alert counts."""
    async with serve_gateway(gateway_settings(retriever.addr)) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        for _ in range(3):
            _, writer = await asyncio.open_connection(host, int(port))
            writer.write(
                b"POST /v1/search HTTP/1.1\r\nHost: x\r\nOrigin: "
                + ALLOWED_ORIGIN.encode()
                + b'\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"query":'
            )
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        async with httpx.AsyncClient() as client:
            for _ in range(100):  # the app sees the hang-up a moment later
                metrics = (await client.get(gw.metrics_url)).text
                if 'gateway_search_requests_total{outcome="invalid"} 3.0' in metrics:
                    break
                await asyncio.sleep(0.02)
    assert 'gateway_search_requests_total{outcome="invalid"} 3.0' in metrics
    assert 'gateway_search_requests_total{outcome="internal"} 0.0' in metrics
    assert retriever.servicer.calls == 0


async def test_a_body_that_stops_mid_way_is_answered_408_within_the_body_timeout(
    retriever: RetrieverServer,
) -> None:
    """A client that sends part of its body and then nothing (or a chunked
    body that never ends) held its request open for as long as it liked."""
    settings = gateway_settings(retriever.addr, gateway_body_timeout_s=0.5)
    head = (
        b"POST /v1/search HTTP/1.1\r\nHost: x\r\nOrigin: " + ALLOWED_ORIGIN.encode()
        + b"\r\nContent-Type: application/json\r\n"
    )  # fmt: skip
    stalls = [
        head + b'Content-Length: 1000\r\n\r\n{"query":',
        head + b'Transfer-Encoding: chunked\r\n\r\n9\r\n{"query":\r\n',
    ]
    async with serve_gateway(settings) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        for stall in stalls:
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(stall)
            await writer.drain()
            async with asyncio.timeout(30):  # the test's own guard; the gateway answers at 0.5 s
                status_line = await reader.readline()
                answer = await reader.read(4096)
            writer.close()
            assert status_line.startswith(b"HTTP/1.1 408"), status_line
            assert b'"code":"body_timeout"' in answer
            assert b"within 0.5 s" in answer
    assert retriever.servicer.calls == 0


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param([("Content-Encoding", "gzip")], "Content-Encoding is not accepted", id="gzip"),
        pytest.param(
            [("Content-Encoding", "identity, br")], "Content-Encoding is not accepted", id="br"
        ),
        pytest.param(
            [("Content-Type", "application/json; charset=latin-1")],
            "charset 'latin-1' is not accepted",
            id="charset",
        ),
    ],
)
async def test_a_compressed_or_other_charset_body_is_refused_as_such(
    retriever: RetrieverServer, extra: list[tuple[str, str]], expected: str
) -> None:
    """A gzip body was read as JSON text and refused as not UTF-8 (400), which
    sends its client looking for a bug in its JSON (probe, 2026-12-06)."""
    headers = [("Origin", ALLOWED_ORIGIN), *extra]
    if not any(name == "Content-Type" for name, _ in extra):
        headers.append(("Content-Type", "application/json"))
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        body = gzip.compress(b'{"query": "x"}') if "gzip" in str(extra) else b'{"query": "x"}'
        response = await client.post(f"{gw.url}/v1/search", content=body, headers=headers)
    assert (response.status_code, _error_code(response)) == (415, "unsupported_media_type")
    assert expected in response.json()["error"]["message"]
    assert retriever.servicer.calls == 0


@pytest.mark.parametrize(
    "extra",
    [
        [("Content-Type", 'application/json; charset="UTF-8"')],
        [("Content-Type", "application/json"), ("Content-Encoding", "identity")],
    ],
    ids=["utf-8-charset", "identity"],
)
async def test_utf8_charset_and_identity_encoding_are_searched(
    retriever: RetrieverServer, extra: list[tuple[str, str]]
) -> None:
    headers = [("Origin", ALLOWED_ORIGIN), *extra]
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        response = await client.post(
            f"{gw.url}/v1/search", content=b'{"query": "x"}', headers=headers
        )
    assert response.status_code == 200, response.text
    assert retriever.servicer.calls == 1


async def test_two_content_type_headers_are_refused(retriever: RetrieverServer) -> None:
    headers = [
        ("Origin", ALLOWED_ORIGIN),
        ("Content-Type", "application/json"),
        ("Content-Type", "text/plain"),
    ]
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        response = await client.post(
            f"{gw.url}/v1/search", content=b'{"query": "x"}', headers=headers
        )
    assert (response.status_code, _error_code(response)) == (415, "unsupported_media_type")
    assert retriever.servicer.calls == 0
