"""A hostile caller's Retrieve requests through the real servers: every list,
string and enum of the request is bounded or checked before any work is done,
and answered INVALID_ARGUMENT naming the field and the limit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.query_text import EMPTY_QUERY, NO_TERM_QUERY
from services.embedding.embedder import Embedder
from services.retriever.request_proto import RequestLimits
from services.retriever.settings import RetrieverSettings
from tests.support.corpus import corpus_documents, url_of
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

RETRIEVE = "/rag.retriever.v1.Retriever/Retrieve"
QUERY = "how are backups taken"


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(tmp_path_factory.mktemp("retrieve-limits"), embedder).start()
    assert stack.upsert(corpus_documents()).counts.rejected == 0
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def channel(stack: BackgroundStack) -> Iterator[grpc.Channel]:
    """For requests sent as raw bytes (no serializer)."""
    with grpc.insecure_channel(stack.retriever_addr) as channel:
        yield channel


def rejection(stack: BackgroundStack, **fields: Any) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        stack.retrieve(fields.pop("query", QUERY), **fields)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value.details() or ""


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"filter": rpb.ScopeFilter(doc_ids=["d"] * 1001)},
            "filter.doc_ids: 1001 values, limit is 1000",
        ),
        ({"filter": rpb.ScopeFilter(urls=["u"] * 1001)}, "filter.urls: 1001 values, limit is 1000"),
        (
            {"filter": rpb.ScopeFilter(doc_ids=["a", "d" * 2049])},
            "filter.doc_ids[1]: 2049 characters, limit is 2048",
        ),
        (
            {"filter": rpb.ScopeFilter(urls=["u" * 2049])},
            "filter.urls[0]: 2049 characters, limit is 2048",
        ),
        (
            {"filter": rpb.ScopeFilter(metadata={f"k{i}": "v" for i in range(65)})},
            "filter.metadata: 65 entries, limit is 64",
        ),
        (
            {"filter": rpb.ScopeFilter(metadata={"k" * 129: "v"})},
            "filter.metadata key: 129 characters, limit is 128",
        ),
        (
            {"filter": rpb.ScopeFilter(metadata={"k": "v" * 1025})},
            "filter.metadata['k']: 1025 characters, limit is 1024",
        ),
        (
            {"filter": rpb.ScopeFilter(scope_id="s" * 129)},
            "filter.scope_id: 129 characters, limit is 128",
        ),
        ({"filter": rpb.ScopeFilter(locale="l" * 36)}, "filter.locale: 36 characters, limit is 35"),
        ({"page_url": "p" * 2049}, "page_url: 2049 characters, limit is 2048"),
        ({"query_language": "x" * 36}, "query_language: 36 characters, limit is 35"),
        (
            {"query_language": "e1"},
            "query_language: 'e1' is not a BCP 47 language tag such as 'en', 'zh-CN' or "
            "'zh-Hant-TW' (language subtag in lower case)",
        ),
        ({"query": "q" * 100_001}, "query: 100001 characters, limit is 100000"),
        ({"context_char_budget": -1}, "context_char_budget: -1 must not be negative"),
        (
            {"context_char_budget": 2**31 - 1},
            "context_char_budget: 2147483647 is above the limit 200000",
        ),
        ({"intent": 99}, "intent: unknown value 99"),
        ({"channels": [rpb.CHANNEL_LEXICAL, 99]}, "channels: unknown channel value(s) [99]"),
    ],
)
def test_out_of_bounds_fields_are_invalid_argument(
    stack: BackgroundStack, fields: dict[str, Any], message: str
) -> None:
    assert rejection(stack, **fields) == message


@pytest.mark.parametrize(
    "query", ["\u200c", "\u2061\u2062", "\ufe0f", "\U0001d173", "\u200b", "\x00", "\u3000"]
)
def test_a_query_of_invisible_characters_is_empty(stack: BackgroundStack, query: str) -> None:
    """The first four once answered ten arbitrary hits (the vector channel
    embeds anything); emptiness is the gateway's definition too."""
    assert rejection(stack, query=query) == EMPTY_QUERY


def test_a_fourteen_megabyte_id_list_is_refused_at_once(
    stack: BackgroundStack, channel: grpc.Channel
) -> None:
    """1.2 M ids once cost the stores seconds and answered UNAVAILABLE."""
    head = rpb.RetrieveRequest(query=QUERY).SerializeToString()
    one_id = rpb.RetrieveRequest(filter=rpb.ScopeFilter(doc_ids=["doc-0000"])).SerializeToString()
    payload = head + one_id * 1_200_000  # repeated fields concatenate: 1.2 M ids
    assert len(payload) > 14_000_000
    call = channel.unary_unary(RETRIEVE)
    started = time.perf_counter()
    with pytest.raises(grpc.RpcError) as caught:
        call(payload, timeout=30)
    elapsed = time.perf_counter() - started
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "filter.doc_ids: 1200000 values, limit is 1000"
    # A hang guard, not a time bound (2 s failed on a loaded CI machine): the
    # old failure, the stores working through the ids, answered UNAVAILABLE.
    assert elapsed < 20.0, elapsed
    # And the service still answers normally.
    assert stack.retrieve(QUERY).hits


def test_filters_at_their_limits_still_work(stack: BackgroundStack) -> None:
    limits = RequestLimits()
    ids = ["backups.md", *(f"none-{i}" for i in range(limits.max_filter_doc_ids - 1))]
    reply = stack.retrieve(
        QUERY,
        filter=rpb.ScopeFilter(doc_ids=ids, locale="en"),
        page_url="p" * limits.max_page_url_chars,
        query_language="en",
    )
    assert {h.url for h in reply.hits} == {url_of("backups.md")}


def test_undecodable_retrieve_is_invalid_argument(channel: grpc.Channel) -> None:
    call = channel.unary_unary(RETRIEVE)
    with pytest.raises(grpc.RpcError) as caught:
        call(b"\x0a\x03a\xffb", timeout=10)  # query: bad UTF-8
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (
        "request could not be decoded as rag.retriever.v1.RetrieveRequest: "
        "string field had bad UTF-8"
    )


def test_limits_come_from_settings_of_the_same_names() -> None:
    settings = RetrieverSettings(max_filter_doc_ids=5, max_raw_query_chars=5000)
    limits = RequestLimits.from_settings(settings)
    assert limits.max_filter_doc_ids == 5 and limits.max_raw_query_chars == 5000
    assert RequestLimits.from_settings(RetrieverSettings()) == RequestLimits()


@pytest.mark.parametrize("query", ["\u0301\u0302", "\u2800", "...", "?!"])
def test_a_query_without_a_letter_digit_or_symbol_is_refused(
    stack: BackgroundStack, query: str
) -> None:
    """Each once answered ten arbitrary vector hits."""
    assert rejection(stack, query=query) == NO_TERM_QUERY


@pytest.mark.parametrize("query", ["429", "text-embedding-v4", "chunkSize=800", "+", "\u20ac"])
def test_identifiers_and_symbols_are_queries(stack: BackgroundStack, query: str) -> None:
    stack.retrieve(query)  # answered (OK), whatever it finds


BCP47 = "is not a BCP 47 language tag such as 'en', 'zh-CN' or 'zh-Hant-TW' (language subtag in lower case)"  # noqa: E501
ORIGIN = "2024-05-01T00:00:00Z"


def recency(**fields: Any) -> rpb.Boosts:
    values: dict[str, Any] = {"weight": 1.0, "scale_days": 30.0, **fields}
    return rpb.Boosts(recency=rpb.RecencyBoost(**values))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"query_language": "en\n"}, f"query_language: 'en\\n' {BCP47}"),
        ({"query_language": "<script>"}, f"query_language: '<script>' {BCP47}"),
        ({"filter": rpb.ScopeFilter(locale="en\n")}, f"filter.locale: 'en\\n' {BCP47}"),
        ({"filter": rpb.ScopeFilter(locale="<script>")}, f"filter.locale: '<script>' {BCP47}"),
        (
            {"filter": rpb.ScopeFilter(metadata={"k": "v\x1bv"})},
            "filter.metadata['k']: contains the control character U+001B",
        ),
        (
            {"filter": rpb.ScopeFilter(metadata={"k\x00": "v"})},
            "filter.metadata key 'k\\x00': contains the control character U+0000",
        ),
        (
            {"filter": rpb.ScopeFilter(metadata={"": "v"})},
            "filter.metadata key '': must be non-empty and contain no '=' "
            "(no document can hold such a key)",
        ),
        (
            {"filter": rpb.ScopeFilter(metadata={"lang=en": ""})},
            "filter.metadata key 'lang=en': must be non-empty and contain no '=' "
            "(no document can hold such a key)",
        ),
        (
            {"filter": rpb.ScopeFilter(scope_id="docs\u202e")},
            "filter.scope_id: contains the format character U+202E (RIGHT-TO-LEFT OVERRIDE)",
        ),
        # A name no document's scope can have (the Indexer's rule): it could
        # only match nothing, silently.
        (
            {"filter": rpb.ScopeFilter(scope_id="a b")},
            "filter.scope_id: 'a b' may hold only letters, digits and . _ - : / "
            "(the scope of no document)",
        ),
        (
            {"filter": rpb.ScopeFilter(scope_ids=["docs", "a\u00e9"])},
            "filter.scope_ids[1]: 'a\u00e9' may hold only letters, digits and . _ - : / "
            "(the scope of no document)",
        ),
        (
            {"boosts": rpb.Boosts(metadata=[rpb.MetadataBoost(key="k\x00", value="v", weight=1)])},
            "boosts.metadata[0].key: contains the control character U+0000",
        ),
        (
            {
                "boosts": rpb.Boosts(
                    metadata=[rpb.MetadataBoost(key="k", value="v" * 1025, weight=1)]
                )
            },
            "boosts.metadata[0].value: 1025 characters, limit is 1024",
        ),
        (
            {"boosts": rpb.Boosts(metadata=[rpb.MetadataBoost(key="k", value="v\x1bv", weight=1)])},
            "boosts.metadata[0].value: contains the control character U+001B",
        ),
        (
            {"boosts": recency(origin=ORIGIN + "\x00")},
            "boosts.recency.origin: '2024-05-01T00:00:00Z\\x00' is not an RFC 3339 time "
            "with a zone offset",
        ),
        (
            {"boosts": recency(weight=0.0, scale_days=float("nan"))},
            "boosts.recency.scale_days: nan is not a finite number",
        ),
        (
            {"boosts": recency(decay=float("inf"))},
            "boosts.recency.decay: inf is not a finite number",
        ),
        (
            {"page_url": "https://user:pass@evil.example@good.example/"},
            "page_url: contains credentials (user:password@ before the host)",
        ),
        (
            {"filter": rpb.ScopeFilter(urls=["https://ok.example/", "https://\u0440ay.example/"])},
            "filter.urls[1]: host label '\u0440ay' mixes Cyrillic and Latin letters",
        ),
    ],
)
def test_malformed_text_fields_are_refused_naming_the_field(
    stack: BackgroundStack, fields: dict[str, Any], message: str
) -> None:
    assert rejection(stack, **fields) == message


def test_well_formed_text_fields_are_answered(stack: BackgroundStack) -> None:
    reply = stack.retrieve(
        QUERY,
        query_language="en",
        filter=rpb.ScopeFilter(locale="en", metadata={"description": "line one\nline two"}),
        boosts=recency(origin=ORIGIN),
        page_url="file:///home/reader/page.html",
    )
    assert reply.hits == []  # no document has that description: nothing, but no refusal
    assert stack.retrieve(QUERY, boosts=recency(origin=ORIGIN)).hits
