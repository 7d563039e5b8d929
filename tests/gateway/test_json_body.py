"""Hostile JSON bodies: deep nesting, bad encodings and values Python's parser
accepts but JSON does not each get a 400 in the API's error shape, never a
500 and never a traceback in the log, and the Retriever sees nothing."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
import structlog

from gateway.errors import ApiError, ErrorCode
from gateway.jsonbody import nests_deeper_than, parse_json_object
from tests.gateway.support import ALLOWED_ORIGIN, RetrieverServer, gateway_settings, serve_gateway

HEADERS = {"Origin": ALLOWED_ORIGIN, "Content-Type": "application/json"}


async def _post_raw(
    settings_overrides: dict[str, Any], retriever: RetrieverServer, bodies: list[bytes]
) -> tuple[list[httpx.Response], list[MutableMapping[str, Any]], str]:
    settings = gateway_settings(retriever.addr, **settings_overrides)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        with structlog.testing.capture_logs() as logs:
            responses = [
                await client.post(f"{gw.url}/v1/search", content=body, headers=HEADERS)
                for body in bodies
            ]
        metrics = (await client.get(gw.metrics_url)).text
    return responses, logs, metrics


def _no_traceback(logs: list[MutableMapping[str, Any]]) -> None:
    assert not [entry for entry in logs if entry.get("exc_info")], logs
    assert not [entry for entry in logs if entry.get("log_level") in ("error", "critical")], logs


DEEP_BODIES = [
    pytest.param(b"[" * 7000 + b"]" * 7000, id="7000-nested-arrays"),
    pytest.param(b'{"a":' * 2500 + b"1" + b"}" * 2500, id="2500-nested-objects"),
    pytest.param(
        b'{"query": "x", "scope": {"metadata": ' + b"[" * 6000 + b"]" * 6000 + b"}}",
        id="deep-inside-a-field",
    ),
    pytest.param(b"[" * 7000, id="unclosed"),
]


@pytest.mark.integration
@pytest.mark.parametrize("body", DEEP_BODIES)
async def test_deep_nesting_is_a_400_naming_the_limit_without_a_traceback(
    retriever: RetrieverServer, body: bytes
) -> None:
    assert len(body) <= 16 * 1024  # under the body size limit: the depth limit must act
    (response,), logs, metrics = await _post_raw({}, retriever, [body])
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "json_too_deep"
    assert "32" in error["message"]  # names the limit
    assert error["request_id"] == response.headers["x-request-id"]
    _no_traceback(logs)
    assert 'gateway_search_requests_total{outcome="invalid"} 1.0' in metrics
    assert 'gateway_search_requests_total{outcome="internal"} 0.0' in metrics
    assert retriever.servicer.calls == 0


@pytest.mark.integration
async def test_the_depth_limit_is_a_setting_and_counts_only_brackets_outside_strings(
    retriever: RetrieverServer,
) -> None:
    at_limit = b'{"query": "ports", "scope": {"doc_ids": []}}'  # three levels
    over = b'{"query": "ports", "scope": {"doc_ids": [[]]}}'  # four
    brackets_in_strings = (
        b'{"query": "ports ' + b"[{" * 200 + b'", "page_url": "\\"' + b"[" * 100 + b'"}'
    )
    responses, logs, _ = await _post_raw(
        {"gateway_max_json_depth": 3}, retriever, [at_limit, over, brackets_in_strings]
    )
    assert [r.status_code for r in responses] == [200, 400, 200]
    assert responses[1].json()["error"]["code"] == "json_too_deep"
    assert "3 levels" in responses[1].json()["error"]["message"]
    assert retriever.servicer.calls == 2
    _no_traceback(logs)


MALFORMED = [
    pytest.param(b'{"query": "\xff\xfe"}', id="invalid-utf8"),
    pytest.param('{"query": "ports"}'.encode("utf-16"), id="utf16"),
    pytest.param(b'{"query": "ports", "top_k": NaN}', id="nan"),
    pytest.param(b'{"query": "ports", "top_k": Infinity}', id="infinity"),
    pytest.param(b'{"query": "ports", "top_k": -Infinity}', id="minus-infinity"),
    pytest.param(b'{"query": "\\ud800 ports"}', id="lone-surrogate"),
    pytest.param(
        b'{"query": "ports", "scope": {"metadata": {"\\udfff": "x"}}}', id="surrogate-key"
    ),
    pytest.param(b'{"query": "ports", "top_k": ' + b"9" * 5000 + b"}", id="huge-integer"),
    pytest.param(b'"ports"', id="top-level-string"),
    pytest.param(b"5", id="top-level-number"),
    pytest.param(b"null", id="top-level-null"),
    pytest.param(b"[]", id="top-level-array"),
    pytest.param(b"", id="empty"),
    pytest.param(b'{"query": "ports"} {}', id="trailing-data"),
    pytest.param(b'{"query": "ports', id="unterminated-string"),
    pytest.param(b'{"query": "ports", "query": "x"}', id="duplicate-name"),
    pytest.param(b'{"query": "ports", "scope": {"locale": "en", "locale": "zh"}}', id="nested-dup"),
]


@pytest.mark.integration
@pytest.mark.parametrize("body", MALFORMED)
async def test_malformed_json_is_a_400_never_a_500(retriever: RetrieverServer, body: bytes) -> None:
    (response,), logs, _ = await _post_raw({}, retriever, [body])
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    _no_traceback(logs)
    assert retriever.servicer.calls == 0


@pytest.mark.integration
async def test_paired_surrogate_escapes_are_text(retriever: RetrieverServer) -> None:
    (response,), _, _ = await _post_raw({}, retriever, [b'{"query": "\\ud83d\\ude00 ports"}'])
    assert response.status_code == 200
    assert retriever.servicer.requests[0].query == "😀 ports"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "deeper_than_2"),
    [
        ("[[]]", False),
        ("[[[]]]", True),
        ('{"a": {"b": {}}}', True),
        ('["[[[[", "]]]]"]', False),
        ('["\\"[[[["]', False),  # an escaped quote does not end the string
        ('["\\\\", [[]]]', True),  # an escaped backslash does not escape the quote
        ("[[]][[]][[]]", False),  # many brackets, never deep
        ("[[[", True),  # unclosed
    ],
)
def test_depth_scan(text: str, deeper_than_2: bool) -> None:
    assert nests_deeper_than(text, 2) is deeper_than_2


@pytest.mark.unit
def test_a_name_twice_is_refused_naming_it() -> None:
    with pytest.raises(ApiError, match="the body names 'top_k' twice in one object"):
        parse_json_object(b'{"query": "a", "top_k": 1, "top_k": 20}', 32)


def test_parse_returns_the_object() -> None:
    assert parse_json_object(b'{"query": "ports", "top_k": 3}', 8) == {"query": "ports", "top_k": 3}
    with pytest.raises(ApiError) as caught:
        parse_json_object(b"[" * 100_000, 32)
    assert caught.value.code is ErrorCode.JSON_TOO_DEEP


@pytest.mark.unit
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'\xef\xbb\xbf{"query": "ports"}',
            "the body starts with a byte order mark (U+FEFF): send JSON as UTF-8 without one",
        ),
        (
            b'{"query": "ports",\n "top_k": }',
            "the body is not valid JSON: Expecting value at line 2 column 11",
        ),
        (
            b'{"query": "a\tb"}',  # a raw tab inside a string
            "the body is not valid JSON: Invalid control character at line 1 column 13",
        ),
        (
            b'{"query": "ports", "top_k": ' + b"9" * 5000 + b"}",
            "the body holds a number too long to read (over 4300 digits)",
        ),
    ],
)
def test_each_refusal_says_what_is_wrong_with_the_body(body: bytes, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_json_object(body, 32)
    assert caught.value.code is ErrorCode.INVALID_JSON and caught.value.message == message
