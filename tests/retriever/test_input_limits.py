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
from services.core.query_text import EMPTY_QUERY
from services.embedding.embedder import Embedder
from services.retriever.servicer import RequestLimits
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
            {"filter": rpb.ScopeFilter(metadata={"k": "v" * 2049})},
            "filter.metadata['k']: 2049 characters, limit is 2048",
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
            "query_language: 'e1' is not a language tag such as en, zh or zh-CN",
        ),
        ({"query": "q" * 100_001}, "query: 100001 characters, limit is 100000"),
        ({"context_char_budget": -1}, "context_char_budget: -1 must not be negative"),
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
    assert elapsed < 2.0, elapsed
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
