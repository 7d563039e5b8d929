"""Pins the exact requests OpenSearchLexicalStore sends through the real
opensearch-py client, captured below its transport by a request-capture
double (`opensearch_capture.CaptureConnection`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from services.core.deadline import Deadline
from services.core.errors import ConfigError, DeadlineExceeded, StoreError, StoreUnavailable
from services.core.models import Chunk, ChunkPayload, ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.server.opensearch import OpenSearchLexicalStore
from services.storage.server.opensearch_client import connect_opensearch
from services.storage.settings import RefreshPolicy
from tests.storage.opensearch_capture import (
    CaptureConnection,
    CapturedRequest,
    OpenSearchCapture,
    bulk_ok,
    capture_settings,
    connection_refused,
)

pytestmark = pytest.mark.unit

INDEX = "rag-chunks"
FIELDS = ["title_terms^0.5", "heading_path_terms^0.5", "text_terms^1"]
ANALYSIS = "2;cjk=words;rows=2"
GOOD_MAPPING = {
    INDEX: {
        "mappings": {
            "_meta": {"analysis": ANALYSIS},
            "properties": {
                "text_terms": {"type": "text"},
                "chunk_id": {"type": "keyword"},
                "meta": {"type": "keyword"},
                "identifiers": {"type": "keyword"},
            },
        }
    }
}
TERMS_FIELD = {"type": "text", "analyzer": "rag_terms", "similarity": "rag_bm25"}
EXPECTED_TEMPLATE = {
    "index_patterns": ["rag-chunks"],
    "priority": 100,
    "template": {
        "settings": {
            "index": {"number_of_shards": 3, "number_of_replicas": 2, "refresh_interval": "1s"},
            "similarity": {"rag_bm25": {"type": "BM25", "k1": 1.2, "b": 0.75}},
            "analysis": {"analyzer": {"rag_terms": {"type": "custom", "tokenizer": "whitespace"}}},
        },
        "mappings": {
            "_meta": {"analysis": ANALYSIS},
            "dynamic": "strict",
            "properties": {
                "chunk_id": {"type": "keyword"},
                "doc_id": {"type": "keyword"},
                "url": {"type": "keyword"},
                "scope_id": {"type": "keyword"},
                "locale": {"type": "keyword"},
                "meta": {"type": "keyword"},
                "identifiers": {"type": "keyword"},
                "content_hash": {"type": "keyword", "index": False},
                "position": {"type": "integer"},
                "generation": {"type": "long"},
                "title": {"type": "text", "index": False},
                "heading_path": {"type": "text", "index": False},
                "text": {"type": "text", "index": False},
                "title_terms": TERMS_FIELD,
                "heading_path_terms": TERMS_FIELD,
                "text_terms": TERMS_FIELD,
            },
        },
    },
}


def chunk(chunk_id: str, **fields: Any) -> Chunk:
    values: dict[str, Any] = {
        "doc_id": "guide/setup",
        "position": 0,
        "text": "Set chunkSize=800 for long pages.",
        "content_hash": "4dcdadc6",
        "url": "https://docs.test/setup",
        "title": "Setup",
        "heading_path": "Guide > Setup",
        "scope_id": "docs",
        "locale": "en",
        "metadata": {"product": "api", "a=b": "c"},
        "generation": 3,
    }
    values.update(fields)
    return Chunk(chunk_id=chunk_id, **values)


SOURCE = {
    "url": "https://docs.test/setup",
    "title": "Setup",
    "heading_path": "Guide > Setup",
    "scope_id": "docs",
    "locale": "en",
    "meta": ["a%3Db=c", "product=api"],
    "generation": 3,
    "chunk_id": "c-1",
    "doc_id": "guide/setup",
    "position": 0,
    "content_hash": "4dcdadc6",
    "text": "Set chunkSize=800 for long pages.",
}
# What the shared analyzer makes of SOURCE: the index gets exactly this.
ANALYZED_SOURCE = {
    **SOURCE,
    "title_terms": "setup",
    "heading_path_terms": "guid setup",
    "text_terms": "set chunksiz 800 for long page",
    "identifiers": ["800", "chunksize", "chunksize=800"],
}


def open_store(capture: OpenSearchCapture, **kwargs: Any) -> OpenSearchLexicalStore:
    client = connect_opensearch(
        capture_settings(), connection_class=CaptureConnection, capture=capture
    )
    return OpenSearchLexicalStore(client, INDEX, timeout_s=2.5, **kwargs)


@pytest.fixture
def capture() -> OpenSearchCapture:
    double = OpenSearchCapture()
    double.on("HEAD", f"/{INDEX}", (200, {}))
    double.on("GET", f"/{INDEX}/_mapping", (200, GOOD_MAPPING))
    double.on_call("POST", f"/{INDEX}/_bulk", lambda r: (200, bulk_ok(r.body)))
    return double


@pytest.fixture
def store(capture: OpenSearchCapture) -> Iterator[OpenSearchLexicalStore]:
    opened = open_store(capture)
    capture.requests.clear()
    yield opened
    opened.close()


# -- index set-up -------------------------------------------------------------


def test_start_up_writes_the_template_and_creates_a_missing_index(capture) -> None:
    capture.on("HEAD", f"/{INDEX}", (404, {}))
    open_store(capture, shards=3, replicas=2).close()
    assert [(r.method, r.path, r.body) for r in capture.requests] == [
        ("PUT", "/_index_template/rag-chunks-template", EXPECTED_TEMPLATE),
        ("HEAD", "/rag-chunks", None),
        ("PUT", "/rag-chunks", None),  # settings and mappings come from the template
        ("GET", "/rag-chunks/_mapping", None),
    ]
    assert {r.timeout for r in capture.requests} == {2.5}


def test_an_index_with_a_foreign_mapping_is_refused(capture) -> None:
    foreign = {INDEX: {"mappings": {"properties": {"text": {"type": "keyword"}}}}}
    capture.on("GET", f"/{INDEX}/_mapping", (200, foreign))
    with pytest.raises(ConfigError, match="OPENSEARCH_INDEX") as refused:
        open_store(capture)
    assert "['text_terms', 'chunk_id', 'meta', 'identifiers']" in str(refused.value)


def test_an_index_built_by_another_analysis_is_refused(capture) -> None:
    older = {INDEX: {"mappings": {**GOOD_MAPPING[INDEX]["mappings"], "_meta": {}}}}
    capture.on("GET", f"/{INDEX}/_mapping", (200, older))
    with pytest.raises(ConfigError, match=r"lexical analysis 1, .* re-index"):
        open_store(capture)


def test_an_index_from_before_generations_is_refused(capture) -> None:
    mappings = GOOD_MAPPING[INDEX]["mappings"]
    older = {INDEX: {"mappings": {**mappings, "_meta": {"analysis": "2;cjk=words"}}}}
    capture.on("GET", f"/{INDEX}/_mapping", (200, older))
    with pytest.raises(ConfigError, match=r"analysis 2;cjk=words, .* 2;cjk=words;rows=2"):
        open_store(capture)


def test_losing_the_creation_race_is_fine(capture) -> None:
    exists = {"error": {"type": "resource_already_exists_exception"}, "status": 400}
    capture.on("HEAD", f"/{INDEX}", (404, {}))
    capture.on("PUT", f"/{INDEX}", (400, exists))
    open_store(capture).close()
    assert ("GET", f"/{INDEX}/_mapping") in [(r.method, r.path) for r in capture.requests]


# -- search -------------------------------------------------------------------

EVERY_FILTER = ScopeFilter(
    scope_id="docs",
    locale="en",
    doc_ids=("guide/setup", "faq"),
    urls=("https://docs.test/setup",),
    metadata=(("product", "api"), ("a=b", "c")),
)
EVERY_CLAUSE: list[dict[str, Any]] = [
    {"term": {"scope_id": "docs"}},
    {"term": {"locale": "en"}},
    {"terms": {"doc_id": ["guide/setup", "faq"]}},
    {"terms": {"url": ["https://docs.test/setup"]}},
    {"term": {"meta": "product=api"}},
    {"term": {"meta": "a%3Db=c"}},
]


def search_body(should: list[dict[str, Any]], filters: list[dict[str, Any]], size: int = 10):
    return {
        "size": size,
        "query": {
            "bool": {
                "must": [{"bool": {"should": should, "minimum_should_match": 1}}],
                "filter": filters,
            }
        },
        "sort": [{"_score": "desc"}, {"chunk_id": "asc"}],
        "track_scores": True,
        "track_total_hits": False,
        "_source": _source_read(should),
    }


# The first phase of a two-phase fetch reads these; a query with identifiers
# (an `exact` clause) reads whole rows, since a hit's `exact` comes from its text.
FIRST_PHASE = ["chunk_id", "doc_id", "position", "scope_id", "locale", "generation", "meta"]


def _source_read(should: list[dict[str, Any]]) -> dict[str, Any]:
    if any("constant_score" in clause for clause in should):
        return {"excludes": ["*_terms", "identifiers"]}
    return {"includes": FIRST_PHASE}


def most_fields(terms: str) -> dict[str, Any]:
    return {"multi_match": {"query": terms, "type": "most_fields", "fields": FIELDS}}


def phrases(words: str) -> list[dict[str, Any]]:
    return [
        {"match_phrase": {"title_terms": {"query": words, "boost": 0.5}}},
        {"match_phrase": {"heading_path_terms": {"query": words, "boost": 0.5}}},
        {"match_phrase": {"text_terms": {"query": words, "boost": 1.0}}},
    ]


def exact(identifier: str) -> dict[str, Any]:
    term = {"term": {"identifiers": identifier}}
    return {"constant_score": {"filter": term, "boost": 1000.0}}


def test_search_sends_weighted_fields_identifier_phrases_and_every_filter(capture, store) -> None:
    store.search("how to set chunkSize=800", 10, EVERY_FILTER, deadline=unrequested_deadline())
    [request] = capture.requests
    assert (request.method, request.path, request.timeout) == ("POST", "/rag-chunks/_search", 2.5)
    # The service's analyzer made the terms (stemmed, stopword `to` left out),
    # the phrase over the identifier's words, and the exact identifier.
    assert request.body == search_body(
        [most_fields("how set chunksiz 800"), *phrases("chunksiz 800"), exact("chunksize=800")],
        EVERY_CLAUSE,
    )


def test_visible_generation_is_a_must_not_range_clause(capture, store) -> None:
    # must_not(generation > 5), not a range lte: a document written before
    # generations existed has no such field and must stay visible.
    capture.on("POST", f"/{INDEX}/_count", (200, {"count": 0}))
    store.search("gateway", 5, ScopeFilter(visible_generation=5), deadline=unrequested_deadline())
    store.count(ScopeFilter(scope_id="docs", visible_generation=0), deadline=unrequested_deadline())
    later = {"bool": {"must_not": [{"range": {"generation": {"gt": 5}}}]}}
    assert [(r.path, r.body) for r in capture.requests] == [
        ("/rag-chunks/_search", search_body([most_fields("gateway")], [later], size=5)),
        (
            "/rag-chunks/_count",
            {
                "query": {
                    "bool": {
                        "filter": [
                            {"term": {"scope_id": "docs"}},
                            {"bool": {"must_not": [{"range": {"generation": {"gt": 0}}}]}},
                        ]
                    }
                }
            },
        ),
    ]


def test_chinese_questions_travel_as_segmented_words(capture, store) -> None:
    store.search("如何设置分块大小", 5, ScopeFilter(), deadline=unrequested_deadline())
    [request] = capture.requests
    assert request.body == search_body([most_fields("设置 分块 大小")], [], size=5)


@pytest.mark.parametrize(
    ("query", "should"),
    [
        # Quotes, OR and field prefixes stay text: `title:x` is an identifier
        # piece (a phrase of `titl x`, an exact term), never a field restriction.
        ('title:x OR "a', [most_fields("titl x"), *phrases("titl x"), exact("title:x")]),
        ("gate* AND NOT (x)^2~", [most_fields("gate x 2"), *phrases("x 2")]),
        ("a\\b {a TO z}", [most_fields("b z"), *phrases("a b"), exact("a\\b")]),
        ("  repeated   repeated\tword ", [most_fields("repeat word")]),
    ],
)
def test_hostile_text_only_travels_as_analyzed_values(capture, store, query, should) -> None:
    store.search(query, 5, ScopeFilter(scope_id="docs"), deadline=unrequested_deadline())
    [request] = capture.requests
    assert request.body == search_body(should, [{"term": {"scope_id": "docs"}}], size=5)
    assert "query_string" not in str(request.body)


def test_blank_text_and_zero_limit_send_nothing(capture, store) -> None:
    assert store.search("   \t", 10, ScopeFilter(), deadline=unrequested_deadline()) == []
    assert (
        store.search("*", 10, ScopeFilter(), deadline=unrequested_deadline()) == []
    )  # no words, no identifier
    assert store.search("gateway", 0, ScopeFilter(), deadline=unrequested_deadline()) == []
    assert capture.requests == []


def test_hits_become_chunks_with_their_metadata(capture, store) -> None:
    # 1000 of the score is the exact-identifier boost: reported apart from BM25.
    hits = {"hits": {"hits": [{"_id": "c-1", "_score": 1003.5, "_source": SOURCE}]}}
    capture.on("POST", f"/{INDEX}/_search", (200, hits))
    [hit] = store.search("chunkSize", 3, ScopeFilter(), deadline=unrequested_deadline())
    assert (hit.score, hit.exact) == (3.5, ("chunksize",))
    assert hit.chunk.metadata == {"product": "api", "a=b": "c"}
    assert (hit.chunk.chunk_id, hit.chunk.text, hit.chunk.generation) == ("c-1", SOURCE["text"], 3)


# -- writes -------------------------------------------------------------------


def test_upsert_is_one_bulk_of_index_actions(capture, store) -> None:
    store.upsert([chunk("c-1")], deadline=unrequested_deadline())
    [request] = capture.requests
    assert (request.method, request.path) == ("POST", "/rag-chunks/_bulk")
    assert request.params == {"refresh": "wait_for"}
    assert request.timeout == 2.5
    assert request.body == [{"index": {"_id": "c-1"}}, ANALYZED_SOURCE]


def test_update_payload_rewrites_whole_documents_if_unchanged_since_read(capture, store) -> None:
    found = {"_id": "c-1", "found": True, "_seq_no": 7, "_primary_term": 2, "_source": SOURCE}
    capture.on("POST", f"/{INDEX}/_mget", (200, {"docs": [found, {"_id": "x", "found": False}]}))
    payload = ChunkPayload(
        url="https://docs.test/moved",
        title="Moved",
        heading_path="Guide > Moved",
        scope_id="docs",
        locale="de",
        metadata={"tier": "pro"},
        generation=4,
    )
    store.update_payload([("c-1", payload), ("x", payload)], deadline=unrequested_deadline())
    assert capture.bodies("POST", f"/{INDEX}/_mget") == [{"ids": ["c-1", "x"]}]
    # Title and heading terms follow the new payload; the text stays; a
    # concurrent write in between makes OpenSearch answer 409 instead.
    assert capture.bodies("POST", f"/{INDEX}/_bulk") == [
        [
            {"index": {"_id": "c-1", "if_seq_no": 7, "if_primary_term": 2}},
            {
                **ANALYZED_SOURCE,
                "url": "https://docs.test/moved",
                "title": "Moved",
                "heading_path": "Guide > Moved",
                "scope_id": "docs",
                "locale": "de",
                "meta": ["tier=pro"],
                "generation": 4,
                "title_terms": "move",
                "heading_path_terms": "guid move",
            },
        ]
    ]


def test_a_conflicting_payload_rewrite_reads_again(capture, store) -> None:
    # Injected fault: the first conditional write answers 409 (another writer,
    # or our own earlier attempt that landed); the store reads the new version.
    old = {"_id": "c-1", "found": True, "_seq_no": 7, "_primary_term": 2, "_source": SOURCE}
    new = {**old, "_seq_no": 8}
    capture.on("POST", f"/{INDEX}/_mget", (200, {"docs": [old]}), (200, {"docs": [new]}))
    capture.on_call("POST", f"/{INDEX}/_bulk", item_statuses({"c-1": 409}))
    store.update_payload(
        [("c-1", ChunkPayload("", "Moved", "", "docs", "en", {}))], deadline=unrequested_deadline()
    )
    bulks = capture.bodies("POST", f"/{INDEX}/_bulk")
    assert [body[0]["index"]["if_seq_no"] for body in bulks] == [7, 8]


def test_writes_are_batched_and_deletes_deduplicated(capture) -> None:
    store = open_store(capture, batch_size=2, refresh=RefreshPolicy.FALSE)
    capture.requests.clear()
    store.upsert([chunk(f"c-{n}") for n in range(3)], deadline=unrequested_deadline())
    store.delete(["c-1", "c-2", "c-1"], deadline=unrequested_deadline())
    bodies = capture.bodies("POST", f"/{INDEX}/_bulk")
    assert [len(body) for body in bodies] == [4, 2, 2]
    assert bodies[2] == [{"delete": {"_id": "c-1"}}, {"delete": {"_id": "c-2"}}]
    assert {r.params["refresh"] for r in capture.requests} == {"false"}


def test_get_and_count_requests(capture, store) -> None:
    capture.on(
        "POST",
        f"/{INDEX}/_mget",
        (
            200,
            {
                "docs": [
                    {"_id": "c-1", "found": True, "_source": SOURCE},
                    {"_id": "x", "found": False},
                ]
            },
        ),
    )
    capture.on("POST", f"/{INDEX}/_count", (200, {"count": 7}))
    assert [
        c.chunk_id for c in store.get(["c-1", "x", "c-1"], deadline=unrequested_deadline())
    ] == ["c-1"]
    assert store.count(EVERY_FILTER, deadline=unrequested_deadline()) == 7
    assert store.count(None, unrequested_deadline()) == 7
    assert [(r.path, r.body) for r in capture.requests] == [
        ("/rag-chunks/_mget", {"ids": ["c-1", "x"]}),
        ("/rag-chunks/_count", {"query": {"bool": {"filter": EVERY_CLAUSE}}}),
        ("/rag-chunks/_count", {"query": {"bool": {"filter": []}}}),
    ]


def scan_hits(*ids_and_generations: tuple[str, int]) -> dict[str, Any]:
    return {
        "hits": {
            "hits": [
                {
                    "_id": chunk_id,
                    "_score": None,
                    "_source": {**SOURCE, "chunk_id": chunk_id, "generation": generation},
                    "sort": [chunk_id],
                }
                for chunk_id, generation in ids_and_generations
            ]
        }
    }


SCAN_BODY = {
    "size": 2,
    "query": {"match_all": {}},
    "sort": [{"chunk_id": "asc"}],
    "track_total_hits": False,
    "_source": {"excludes": ["*_terms", "identifiers"]},
}


def test_scan_pages_by_search_after_until_a_short_page(capture, store) -> None:
    capture.on(
        "POST",
        f"/{INDEX}/_search",
        (200, scan_hits(("c-1", 1), ("c-2", 9))),
        (200, scan_hits(("c-3", 2))),
    )
    pages = list(store.scan(batch=2))
    # No filter: a scan sees every row, whatever its generation.
    assert [(r.method, r.path, r.body, r.timeout) for r in capture.requests] == [
        ("POST", "/rag-chunks/_search", SCAN_BODY, 2.5),
        ("POST", "/rag-chunks/_search", {**SCAN_BODY, "search_after": ["c-2"]}, 2.5),
    ]
    assert [[(c.chunk_id, c.generation) for c in page] for page in pages] == [
        [("c-1", 1), ("c-2", 9)],
        [("c-3", 2)],
    ]
    assert pages[1][0].metadata == {"product": "api", "a=b": "c"}


def test_scan_asks_once_more_after_a_full_page_and_stops_on_an_empty_one(capture, store) -> None:
    capture.on(
        "POST",
        f"/{INDEX}/_search",
        (200, scan_hits(("c-1", 1), ("c-2", 2))),
        (200, scan_hits()),
    )
    pages = list(store.scan(batch=2))
    assert [r.body for r in capture.requests] == [
        SCAN_BODY,
        {**SCAN_BODY, "search_after": ["c-2"]},
    ]
    assert [[c.chunk_id for c in page] for page in pages] == [["c-1", "c-2"]]


def test_scan_of_an_empty_index_yields_no_page(capture, store) -> None:
    assert list(store.scan(batch=2)) == []
    assert [r.body for r in capture.requests] == [SCAN_BODY]


# -- per-item bulk results and faults (injected by the double) ----------------


def item_statuses(statuses: dict[str, int]):
    def respond(request: CapturedRequest):
        items = []
        for line in request.body:
            op = next(iter(line))
            if op in ("index", "update", "delete"):
                doc_id = line[op]["_id"]
                status = statuses.pop(doc_id, 200)
                error = (
                    {"type": "injected", "reason": f"status {status}"} if status >= 300 else None
                )
                items.append({op: {"_id": doc_id, "status": status, "error": error}})
        return 200, {
            "errors": any(next(iter(i.values()))["status"] >= 300 for i in items),
            "items": items,
        }

    return respond


def test_rejected_items_are_resent_alone(capture, store) -> None:
    capture.on_call("POST", f"/{INDEX}/_bulk", item_statuses({"c-2": 429}))
    store.upsert([chunk("c-1"), chunk("c-2"), chunk("c-3")], deadline=unrequested_deadline())
    sent = [
        [line["index"]["_id"] for line in body if "index" in line]
        for body in capture.bodies("POST", f"/{INDEX}/_bulk")
    ]
    assert sent == [["c-1", "c-2", "c-3"], ["c-2"]]


def test_a_failed_item_fails_the_write_naming_it(capture, store) -> None:
    capture.on_call("POST", f"/{INDEX}/_bulk", item_statuses({"c-2": 400}))
    with pytest.raises(StoreError, match=r"1 item\(s\) failed: c-2: 400 injected"):
        store.upsert([chunk("c-1"), chunk("c-2")], deadline=unrequested_deadline())
    assert len(capture.requests) == 1


def test_missing_documents_are_not_errors_for_delete_and_update(capture, store) -> None:
    capture.on_call("POST", f"/{INDEX}/_bulk", item_statuses({"gone": 404}))
    capture.on("POST", f"/{INDEX}/_mget", (200, {"docs": [{"_id": "ghost", "found": False}]}))
    store.delete(["gone"], deadline=unrequested_deadline())
    store.update_payload(
        [("ghost", ChunkPayload("", "", "", "", "en", {}))], deadline=unrequested_deadline()
    )
    assert [r.path for r in capture.requests] == [f"/{INDEX}/_bulk", f"/{INDEX}/_mget"]


def test_connection_errors_retry_writes_but_not_reads(capture, store) -> None:
    capture.on(
        "POST", f"/{INDEX}/_bulk", connection_refused(), (200, {"errors": False, "items": []})
    )
    store.delete(["c-1"], deadline=unrequested_deadline())
    capture.on("POST", f"/{INDEX}/_search", connection_refused())
    with pytest.raises(StoreUnavailable, match="opensearch search failed"):
        store.search("gateway", 3, ScopeFilter(), deadline=unrequested_deadline())
    assert [r.path for r in capture.requests] == [f"/{INDEX}/_bulk"] * 2 + [f"/{INDEX}/_search"]


def test_ping_checks_index_health_and_a_closed_store_sends_nothing(capture, store) -> None:
    capture.on(
        "GET", f"/_cluster/health/{INDEX}", (200, {"status": "yellow"}), (200, {"status": "red"})
    )
    store.ping()
    with pytest.raises(StoreUnavailable, match="health is red"):
        store.ping()
    store.close()
    with pytest.raises(StoreUnavailable):
        store.ping()
    assert len(capture.requests) == 2


def test_credentials_and_tls_come_from_settings(capture) -> None:
    client = connect_opensearch(
        capture_settings(OPENSEARCH_VERIFY_CERTS=False),
        connection_class=CaptureConnection,
        capture=capture,
    )
    [connection] = client.transport.connection_pool.connections
    assert connection.host == "https://opensearch.test:9200"
    assert connection.options["http_auth"] == ("rag", "secret")
    assert connection.options["verify_certs"] is False
    assert client.transport.max_retries == 0


def test_several_scopes_are_one_terms_clause(capture, store) -> None:
    capture.on("POST", f"/{INDEX}/_count", (200, {"count": 0}))
    store.count(ScopeFilter(scope_ids=("docs", "blog")), deadline=unrequested_deadline())
    assert [(r.path, r.body) for r in capture.requests] == [
        (
            "/rag-chunks/_count",
            {"query": {"bool": {"filter": [{"terms": {"scope_id": ["docs", "blog"]}}]}}},
        )
    ]


def test_a_search_takes_at_most_the_time_left_in_the_callers_deadline(capture, store) -> None:
    store.search("gateway", 5, ScopeFilter(), Deadline.after(0.8))
    [request] = capture.requests
    assert request.timeout is not None and 0.5 < request.timeout <= 0.8  # not the store's 2.5 s
    with pytest.raises(DeadlineExceeded):
        store.search("gateway", 5, ScopeFilter(), Deadline.after(-1))
    assert len(capture.requests) == 1  # nothing sent


def test_every_call_takes_at_most_the_time_left_in_the_callers_deadline(capture, store) -> None:
    found = {"_id": "c-1", "found": True, "_seq_no": 7, "_primary_term": 2, "_source": SOURCE}
    capture.on("POST", f"/{INDEX}/_mget", (200, {"docs": [found]}))
    capture.on("POST", f"/{INDEX}/_count", (200, {"count": 1}))
    left = Deadline.after(0.8)
    store.count(EVERY_FILTER, left)
    store.upsert([chunk("c-1")], left)
    store.update_payload([("c-1", ChunkPayload("", "Moved", "", "docs", "en", {}))], left)
    store.delete(["c-1"], left)
    assert [(r.method, r.path) for r in capture.requests] == [
        ("POST", "/rag-chunks/_count"),
        ("POST", "/rag-chunks/_bulk"),
        ("POST", "/rag-chunks/_mget"),
        ("POST", "/rag-chunks/_bulk"),
        ("POST", "/rag-chunks/_bulk"),
    ]
    for request in capture.requests:  # not the store's 2.5 s
        assert request.timeout is not None and 0.5 < request.timeout <= 0.8, request.path


def test_a_passed_deadline_sends_nothing(capture, store) -> None:
    passed = Deadline.after(-1)
    calls = [
        lambda: store.count(EVERY_FILTER, passed),
        lambda: store.upsert([chunk("c-1")], passed),
        lambda: store.update_payload(
            [("c-1", ChunkPayload("", "T", "", "docs", "en", {}))], passed
        ),
        lambda: store.delete(["c-1"], passed),
    ]
    for call in calls:
        with pytest.raises(DeadlineExceeded, match="no time left"):
            call()
    assert capture.requests == []


def test_a_retried_bulk_write_never_waits_past_the_deadline(capture, store) -> None:
    # Injected fault: every bulk item is rejected as overloaded (429). The
    # first backoff (0.2 s and more) would end past the 0.1 s left: no retry.
    capture.on_call("POST", f"/{INDEX}/_bulk", item_statuses({"c-1": 429}))
    with pytest.raises(StoreUnavailable, match="429"):
        store.upsert([chunk("c-1")], Deadline.after(0.1))
    assert len(capture.bodies("POST", f"/{INDEX}/_bulk")) == 1
    # With time for the backoff, the rejected item is sent again and lands.
    capture.on_call("POST", f"/{INDEX}/_bulk", item_statuses({"c-1": 429}))
    store.upsert([chunk("c-1")], Deadline.after(30.0))
    assert len(capture.bodies("POST", f"/{INDEX}/_bulk")) == 3
