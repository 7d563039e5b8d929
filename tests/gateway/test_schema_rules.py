"""The search request's field rules (gateway/schema.py): strict JSON types,
finite numbers, BCP 47 tags, RFC 3339 times, no control or format characters
in keys and values, URLs without credentials or mixed-script hosts. Each
refusal names the field (the problem's `loc`)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gateway.errors import ApiError, ErrorCode
from gateway.schema import SearchLimits, SearchRequest
from gateway.search import describe_validation

pytestmark = pytest.mark.unit

RECENCY = {"weight": 1, "scale_days": 30}

# (body, the field the message names, a phrase of the problem): the inputs of
# the adversarial review first, each once accepted.
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"fusion": {"rrf_k": "60"}}, "fusion.rrf_k", "valid number"),
    ({"fusion": {"rrf_k": True}}, "fusion.rrf_k", "valid number"),
    ({"boosts": {"recency": {**RECENCY, "weight": True}}}, "boosts.recency.weight", "number"),
    (
        {"boosts": {"recency": {**RECENCY, "origin": "2024-05-01T00:00:00Z\x00"}}},
        "boosts.recency.origin",
        "RFC 3339",
    ),
    (
        {"boosts": {"recency": {"weight": 1, "scale_days": "NaN"}}},
        "boosts.recency.scale_days",
        "valid number",
    ),
    # Bounds the Retriever applies: refused here with 422 before any call (probe 3).
    (
        {"boosts": {"metadata": [{"key": "k", "value": "v", "weight": 1e308}]}},
        "boosts.metadata.0.weight",
        "less than or equal to 10",
    ),
    (
        {"boosts": {"metadata": [{"key": "k", "value": "v", "weight": -1}]}},
        "boosts.metadata.0.weight",
        "greater than 0",
    ),
    ({"boosts": {"recency": {**RECENCY, "weight": 11}}}, "boosts.recency.weight", "10"),
    ({"boosts": {"recency": {**RECENCY, "decay": 1}}}, "boosts.recency.decay", "less than 1"),
    (
        {"boosts": {"recency": {**RECENCY, "scale_days": 0}}},
        "boosts.recency.scale_days",
        "greater than 0",
    ),
    (
        {"boosts": {"recency": {**RECENCY, "offset_days": 1e6}}},
        "boosts.recency.offset_days",
        "36500",
    ),
    ({"query_language": "en\n"}, "query_language", "BCP 47"),
    ({"scope": {"locale": "en\n"}}, "scope.locale", "BCP 47"),
    ({"scope": {"locale": "<script>"}}, "scope.locale", "BCP 47"),
    ({"scope": {"metadata": {"k": "v\x1bv"}}}, "scope.metadata.k", "U+001B"),
    ({"scope": {"metadata": {"k\x00": "v"}}}, "scope.metadata", "U+0000"),
    (
        {"boosts": {"metadata": [{"key": "k\x00", "value": "v", "weight": 1}]}},
        "boosts.metadata.0.key",
        "U+0000",
    ),
    (
        {"boosts": {"metadata": [{"key": "k", "value": "v\u202e", "weight": 1}]}},
        "boosts.metadata.0.value",
        "U+202E",
    ),
    ({"scope": {"scope_id": "docs\u200b"}}, "scope.scope_id", "letters, digits"),
    # The Retriever's bounds, mirrored so the caller hears 422 at once (probe 5).
    ({"scope": {"scope_id": "a" * 129}}, "scope.scope_id", "at most 128 characters"),
    ({"scope": {"scope_id": "a b"}}, "scope.scope_id", "letters, digits and . _ - : /"),
    ({"scope": {"scope_ids": ["docs", ""]}}, "scope.scope_ids.1", "at least 1 character"),
    (
        {"page_url": "https://user:pass@evil.example@good.example/"},
        "page_url",
        "credentials",
    ),
    ({"scope": {"urls": ["https://p\u0430ypal.example/"]}}, "scope.urls.0", "Cyrillic and Latin"),
    # Strict everywhere, not only where the review looked.
    ({"diversity": {"mmr_lambda": "0.5"}}, "diversity.mmr_lambda", "valid number"),
    ({"diversity": {"window": 5.0}}, "diversity.window", "valid integer"),
    ({"debug": "true"}, "debug", "valid boolean"),
    ({"group_by_document": 1}, "group_by_document", "valid boolean"),
    (
        {"boosts": {"metadata": [{"key": "k", "value": "v", "weight": "1"}]}},
        "boosts.metadata.0.weight",
        "number",
    ),
    ({"boosts": {"recency": {**RECENCY, "decay": False}}}, "boosts.recency.decay", "number"),
    (
        {"boosts": {"recency": {**RECENCY, "origin": "2024-05-01"}}},
        "boosts.recency.origin",
        "RFC 3339",
    ),
    ({"fusion": {"rrf_k": 1e999}}, "fusion.rrf_k", "finite number"),
]


@pytest.mark.parametrize(("fields", "field", "phrase"), REFUSED)
def test_each_malformed_field_is_refused_naming_it(
    fields: dict[str, Any], field: str, phrase: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        SearchRequest.model_validate({"query": "ports", **fields})
    message = describe_validation(caught.value)
    assert message.startswith(field), message
    assert phrase in message, message


ACCEPTED: list[dict[str, Any]] = [
    {"fusion": {"rrf_k": 60}},  # an integer is a JSON number
    {"fusion": {"rrf_k": 60.5, "method": "rrf"}},
    {"boosts": {"recency": {**RECENCY, "origin": "2024-05-01T00:00:00.5+02:00"}}},
    {"query_language": "zh-Hant-TW", "scope": {"locale": "pt-BR"}},
    {"scope": {"metadata": {"description": "line one\nline two"}}},
    {"scope": {"metadata": {"title": "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"}}},
    {"page_url": "https://\u4f8b\u5b50.\u6d4b\u8bd5/docs#part"},
    {"page_url": "file:///home/reader/page.html"},
]


@pytest.mark.parametrize("fields", ACCEPTED)
def test_well_formed_fields_are_accepted(fields: dict[str, Any]) -> None:
    SearchRequest.model_validate({"query": "ports", **fields})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"scope": {"scope_id": "docs", "scope_ids": ["docs", "blog"]}},
            "scope: give scope_id or scope_ids, not both",
        ),
        (
            {"fusion": {"method": "min_max", "rrf_k": 5}},
            "fusion.rrf_k: applies to rrf only, not min_max",
        ),
    ],
)
def test_rules_across_fields_are_the_retrievers_and_refused_before_the_call(
    fields: dict[str, Any], message: str
) -> None:
    request = SearchRequest.model_validate({"query": "ports", **fields})
    with pytest.raises(ApiError) as caught:
        SearchLimits(max_query_chars=1000, max_top_k=50, max_filter_values=64).check(request)
    assert caught.value.code is ErrorCode.INVALID_REQUEST and caught.value.message == message
