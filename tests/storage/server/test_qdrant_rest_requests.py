"""Pins the REST bodies QdrantVectorStore sends when QDRANT_PREFER_GRPC=false,
through the real qdrant-client and its real httpx client."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from qdrant_client import models

from services.core.deadline import Deadline
from services.core.errors import StoreError
from services.core.models import ScopeFilter
from services.storage.base import VectorQuery, unrequested_deadline
from services.storage.payload import chunk_payload, stored_chunk_from_payload
from services.storage.server.qdrant import QdrantVectorStore, connect_qdrant
from services.storage.settings import StoreSettings
from tests.storage.qdrant_capture import (
    ALL_INDEXED,
    DIM,
    FAQ_0,
    SETUP_0,
    SETUP_1,
    chunk,
    rest_collection_info,
)

pytestmark = pytest.mark.unit


Sent = list[tuple[str, str, Any]]


def open_store(
    sent: Sent, failures: list[int] | None = None, scroll_pages: list[Any] | None = None
) -> QdrantVectorStore:
    """REQUEST-CAPTURE DOUBLE: an httpx transport under the real client that
    records each request (into `sent`) and answers like a Qdrant server whose
    collection exists; `failures` (consumed, may be appended to) are HTTP
    statuses for the next point writes, `scroll_pages` (consumed) the scroll
    results in order."""
    info = rest_collection_info(DIM, models.Distance.COSINE, ALL_INDEXED)
    pending = failures if failures is not None else []
    pages = scroll_pages if scroll_pages is not None else []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        sent.append((request.method, request.url.path + "?" + request.url.query.decode(), body))
        result: Any = {"operation_id": 1, "status": "completed"}
        if request.url.path.endswith("/exists"):
            result = {"exists": True}
        elif request.url.path == "/collections/rag_chunks":
            result = info.model_dump(mode="json")
        elif request.url.path.endswith("/points/query"):
            result = {"points": []}
        elif request.url.path.endswith("/points/query/batch"):
            result = [{"points": []} for _ in body["searches"]]
        elif request.url.path.endswith("/points/count"):
            result = {"count": 0}
        elif request.url.path.endswith("/points/scroll"):
            result = pages.pop(0)
        elif pending:
            return httpx.Response(pending.pop(0), json={"status": {"error": "injected"}})
        return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})

    settings = StoreSettings(
        QDRANT_URL="http://qdrant.test:6333",
        OPENSEARCH_URL="http://os.test:9200",
        QDRANT_PREFER_GRPC=False,
    )
    client = connect_qdrant(
        settings, check_compatibility=False, transport=httpx.MockTransport(answer)
    )
    return QdrantVectorStore(client, "rag_chunks", DIM, timeout_s=2)


# A search reads the first phase of a two-phase fetch; `get` reads whole rows.
FIRST_PHASE = ["chunk_id", "doc_id", "position", "scope_id", "locale", "metadata", "generation"]


def test_rest_bodies_for_upsert_and_search() -> None:
    sent: list[tuple[str, str, Any]] = []
    store = open_store(sent)
    store.upsert(
        [chunk("chunk-setup-0", metadata={}, generation=4)],
        [[1, 0, 0, 0]],
        deadline=unrequested_deadline(),
    )
    store.search(
        [0, 1, 0, 0],
        5,
        ScopeFilter(scope_id="docs", doc_ids=("faq",)),
        deadline=unrequested_deadline(),
    )
    assert [(method, path) for method, path, _ in sent[:2]] == [
        ("GET", "/collections/rag_chunks/exists?"),
        ("GET", "/collections/rag_chunks?"),
    ]
    assert sent[2:] == [
        (
            "PUT",
            "/collections/rag_chunks/points?wait=true&timeout=2",
            {
                "points": [
                    {
                        "id": SETUP_0,
                        "vector": [1.0, 0.0, 0.0, 0.0],
                        "payload": {
                            "url": "https://docs.test/setup",
                            "title": "Setup",
                            "heading_path": "Guide > Setup > Ports",
                            "scope_id": "docs",
                            "locale": "en",
                            "metadata": {},
                            "meta": [],
                            "generation": 4,
                            "chunk_id": "chunk-setup-0",
                            "doc_id": "guide/setup",
                            "position": 0,
                            "content_hash": "b733a12a",
                            "text": "Ports: the gateway listens on 8080.",
                        },
                    }
                ]
            },
        ),
        (
            "POST",
            "/collections/rag_chunks/points/query?timeout=2",
            {
                "query": {"nearest": [0.0, 1.0, 0.0, 0.0]},
                "filter": {
                    "must": [
                        {"key": "scope_id", "match": {"value": "docs"}},
                        {"key": "doc_id", "match": {"any": ["faq"]}},
                    ]
                },
                "params": {"hnsw_ef": 256, "quantization": {"rescore": True, "oversampling": 2.0}},
                "limit": 5,
                "with_vector": False,
                "with_payload": FIRST_PHASE,
            },
        ),
    ]
    store.close()


def test_rest_errors_are_retried_when_transient_and_reported_otherwise() -> None:
    sent: Sent = []
    failures = [503, 429]
    store = open_store(sent, failures)
    store.delete(["chunk-setup-0"], deadline=unrequested_deadline())  # 503, 429, then accepted
    failures.append(400)
    with pytest.raises(StoreError, match="qdrant delete failed: UnexpectedResponse"):
        store.delete(
            ["chunk-setup-0"], deadline=unrequested_deadline()
        )  # 400: the server rejected it, no retry
    assert [path for _, path, _ in sent[2:]] == [
        "/collections/rag_chunks/points/delete?wait=true&timeout=2"
    ] * 4
    store.close()


def test_rest_visible_generation_is_a_must_not_range() -> None:
    sent: Sent = []
    store = open_store(sent)
    store.search(
        [0, 1, 0, 0], 5, ScopeFilter(visible_generation=3), deadline=unrequested_deadline()
    )
    store.count(ScopeFilter(scope_id="docs", visible_generation=3), deadline=unrequested_deadline())
    later = {"key": "generation", "range": {"gt": 3}}
    assert [(path, body["filter"]) for _, path, body in sent[2:]] == [
        ("/collections/rag_chunks/points/query?timeout=2", {"must": [], "must_not": [later]}),
        (
            "/collections/rag_chunks/points/count?timeout=2",
            {"must": [{"key": "scope_id", "match": {"value": "docs"}}], "must_not": [later]},
        ),
    ]
    store.close()


def test_rest_scan_scrolls_from_each_next_page_offset_until_there_is_none() -> None:
    rows = {
        point: chunk_payload(chunk(chunk_id, generation=generation))
        for point, chunk_id, generation in (
            (SETUP_0, "chunk-setup-0", 1),
            (SETUP_1, "chunk-setup-1", 8),
            (FAQ_0, "chunk-faq-0", 2),
        )
    }
    points = [{"id": point, "payload": payload} for point, payload in rows.items()]
    sent: Sent = []
    pages = [
        {"points": points[:2], "next_page_offset": FAQ_0},
        {"points": points[2:], "next_page_offset": None},
    ]
    store = open_store(sent, scroll_pages=pages)
    scanned = list(store.scan(batch=2))
    first = {"limit": 2, "with_payload": True, "with_vector": False}
    assert sent[2:] == [
        ("POST", "/collections/rag_chunks/points/scroll?timeout=2", first),
        ("POST", "/collections/rag_chunks/points/scroll?timeout=2", {**first, "offset": FAQ_0}),
    ]
    by_point = [stored_chunk_from_payload(payload) for payload in rows.values()]
    assert scanned == [by_point[:2], by_point[2:]]
    store.close()


def test_rest_several_scopes_match_any_of_them() -> None:
    sent: Sent = []
    store = open_store(sent)
    store.count(ScopeFilter(scope_ids=("docs", "blog")), deadline=unrequested_deadline())
    assert [(path, body["filter"]) for _, path, body in sent[2:]] == [
        (
            "/collections/rag_chunks/points/count?timeout=2",
            {"must": [{"key": "scope_id", "match": {"any": ["docs", "blog"]}}]},
        ),
    ]
    store.close()


def test_rest_search_many_is_one_batch_request() -> None:
    sent: list[tuple[str, str, Any]] = []
    store = open_store(sent)
    queries = [
        VectorQuery([0, 1, 0, 0], 5, ScopeFilter(locale="en")),
        VectorQuery([0, 1, 0, 0], 0, ScopeFilter()),  # nothing asked: not sent
        VectorQuery([1, 0, 0, 0], 3, ScopeFilter(locale="zh-CN")),
    ]
    assert store.search_many(queries, deadline=unrequested_deadline()) == [[], [], []]
    [(method, path, body)] = [request for request in sent if "/points/query" in request[1]]
    assert (method, path) == ("POST", "/collections/rag_chunks/points/query/batch?timeout=2")
    assert [(s["query"], s["filter"], s["limit"]) for s in body["searches"]] == [
        ({"nearest": [0.0, 1.0, 0.0, 0.0]}, {"must": [locale("en")]}, 5),
        ({"nearest": [1.0, 0.0, 0.0, 0.0]}, {"must": [locale("zh-CN")]}, 3),
    ]
    assert all(s["with_payload"] == FIRST_PHASE for s in body["searches"])
    store.close()


def locale(value: str) -> dict[str, Any]:
    return {"key": "locale", "match": {"value": value}}


def test_rest_calls_send_the_time_left_in_the_callers_deadline() -> None:
    sent: Sent = []
    store = open_store(sent)
    left = Deadline.after(0.3)
    store.count(ScopeFilter(), left)
    store.upsert([chunk("chunk-setup-0")], [[1, 0, 0, 0]], left)
    store.delete(["chunk-setup-0"], left)
    store.search_many([VectorQuery([0, 1, 0, 0], 5, ScopeFilter())], left)
    # Whole seconds, rounded up from the 0.3 s left, not the store's 2 s.
    assert [(method, path) for method, path, _ in sent[2:]] == [
        ("POST", "/collections/rag_chunks/points/count?timeout=1"),
        ("PUT", "/collections/rag_chunks/points?wait=true&timeout=1"),
        ("POST", "/collections/rag_chunks/points/delete?wait=true&timeout=1"),
        ("POST", "/collections/rag_chunks/points/query/batch?timeout=1"),
    ]
    store.close()
