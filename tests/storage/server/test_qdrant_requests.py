"""Pins the exact gRPC requests QdrantVectorStore sends through the real
qdrant-client, captured by a request-capture double on a local port
(`qdrant_capture`). The REST bodies (QDRANT_PREFER_GRPC=false) are pinned in
test_qdrant_rest_requests.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from qdrant_client import grpc as qg
from qdrant_client import models
from qdrant_client.conversions.conversion import RestToGrpc

from services.core.deadline import Deadline
from services.core.errors import ConfigError, DeadlineExceeded, StoreError, StoreUnavailable
from services.core.models import ChunkPayload, ScopeFilter
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
    QdrantCapture,
    chunk,
    collection_info,
    start_capture_server,
)

pytestmark = [
    pytest.mark.unit,
    # The double listens on plain TCP; production URLs use https with an API key.
    pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection"),
]


def settings(**extra: Any) -> StoreSettings:
    return StoreSettings(
        QDRANT_URL="http://127.0.0.1:1",
        OPENSEARCH_URL="http://127.0.0.1:2",
        QDRANT_API_KEY="test-key",
        QDRANT_TIMEOUT_S=3,
        **extra,
    )


@pytest.fixture
def capture() -> Iterator[tuple[QdrantCapture, int]]:
    double = QdrantCapture(info=collection_info(DIM, models.Distance.COSINE))
    server, port = start_capture_server(double)
    yield double, port
    server.stop(grace=None)


def open_store(capture: tuple[QdrantCapture, int], batch_size: int = 256) -> QdrantVectorStore:
    double, port = capture
    client = connect_qdrant(settings(QDRANT_GRPC_PORT=port), check_compatibility=False)
    store = QdrantVectorStore(client, "rag_chunks", DIM, timeout_s=3, batch_size=batch_size)
    double.calls.clear()  # each test pins only the calls it is about
    return store


@pytest.fixture
def store(capture: tuple[QdrantCapture, int]) -> Iterator[QdrantVectorStore]:
    capture[0].exists = True
    capture[0].info = collection_info(DIM, models.Distance.COSINE, ALL_INDEXED)
    opened = open_store(capture)
    yield opened
    opened.close()


# -- collection set-up --------------------------------------------------------


def test_missing_collection_is_created_with_cosine_and_payload_indexes(capture) -> None:
    double, port = capture
    client = connect_qdrant(settings(QDRANT_GRPC_PORT=port), check_compatibility=False)
    QdrantVectorStore(
        client, "rag_chunks", DIM, timeout_s=3, shards=3, replication_factor=2
    ).close()
    index = {
        "collection_name": "rag_chunks",
        "wait": True,
        "field_type": "FieldTypeKeyword",
        "timeout": "3",
    }
    # Filterable-HNSW links for the scope only (services.storage.embedded.qdrant_edge).
    no_graph = {"field_index_params": {"keyword_index_params": {"enable_hnsw": False}}}
    assert [(c.method, c.request) for c in double.calls] == [
        ("CollectionExists", {"collection_name": "rag_chunks"}),
        (
            "Create",
            {
                "collection_name": "rag_chunks",
                "timeout": "3",
                # RAG_VECTOR_QUANTIZATION=int8 (the default): an int8 copy in
                # memory, the originals on disk.
                "vectors_config": {"params": {"size": "4", "distance": "Cosine", "on_disk": True}},
                "shard_number": 3,
                "replication_factor": 2,
                "quantization_config": {
                    "scalar": {"type": "Int8", "quantile": 0.99, "always_ram": True}
                },
            },
        ),
        ("GetCollection", {"collection_name": "rag_chunks"}),
        (
            "CreateFieldIndex",
            {
                **index,
                "field_name": "scope_id",
                "field_index_params": {"keyword_index_params": {"is_tenant": True}},
            },
        ),
        *(
            ("CreateFieldIndex", {**index, "field_name": field, **no_graph})
            for field in ("locale", "doc_id", "url", "meta")
        ),
        (
            "CreateFieldIndex",
            {
                **index,
                "field_name": "generation",
                "field_type": "FieldTypeInteger",
                "field_index_params": {
                    "integer_index_params": {"lookup": True, "range": True, "enable_hnsw": False}
                },
            },
        ),
    ]
    assert all(call.metadata["api-key"] == "test-key" for call in double.calls)


def test_existing_collection_only_gets_its_missing_indexes(capture) -> None:
    double, port = capture
    double.exists = True
    double.info = collection_info(DIM, models.Distance.COSINE, ("scope_id", "locale"))
    client = connect_qdrant(settings(QDRANT_GRPC_PORT=port), check_compatibility=False)
    QdrantVectorStore(client, "rag_chunks", DIM).close()
    assert double.methods() == ["CollectionExists", "GetCollection", *["CreateFieldIndex"] * 4]
    assert [(r["field_name"], r["field_type"]) for r in double.requests("CreateFieldIndex")] == [
        ("doc_id", "FieldTypeKeyword"),
        ("url", "FieldTypeKeyword"),
        ("meta", "FieldTypeKeyword"),
        ("generation", "FieldTypeInteger"),
    ]


def test_a_collection_with_every_index_gets_none(capture) -> None:
    double, port = capture
    double.exists = True
    double.info = collection_info(DIM, models.Distance.COSINE, ALL_INDEXED)
    client = connect_qdrant(settings(QDRANT_GRPC_PORT=port), check_compatibility=False)
    QdrantVectorStore(client, "rag_chunks", DIM).close()
    assert double.methods() == ["CollectionExists", "GetCollection"]


@pytest.mark.parametrize(
    ("size", "distance", "expected"),
    [
        (384, models.Distance.COSINE, "holds 384-d vectors with Cosine distance"),
        (DIM, models.Distance.DOT, "holds 4-d vectors with Dot distance"),
    ],
)
def test_an_incompatible_collection_is_refused(capture, size, distance, expected) -> None:
    double, port = capture
    double.exists, double.info = True, collection_info(size, distance)
    client = connect_qdrant(settings(QDRANT_GRPC_PORT=port), check_compatibility=False)
    with pytest.raises(ConfigError) as refused:
        QdrantVectorStore(client, "rag_chunks", DIM)
    message = str(refused.value)
    assert expected in message and "QDRANT_COLLECTION" in message and "4-d" in message
    assert "Create" not in double.methods() and "CreateFieldIndex" not in double.methods()


# -- writes -------------------------------------------------------------------


def test_upsert_sends_uuid_ids_vectors_and_the_shared_payload(capture, store) -> None:
    double, _ = capture
    store.upsert(
        [chunk("chunk-setup-0", metadata={"a=b": "c", "product": "api"}, generation=7)],
        [[0.5, 0, 0, 1]],
        deadline=unrequested_deadline(),
    )
    assert double.requests("Upsert") == [
        {
            "collection_name": "rag_chunks",
            "wait": True,
            "timeout": "3",
            "points": [
                {
                    "id": {"uuid": SETUP_0},
                    "vectors": {"vector": {"dense": {"data": [0.5, 0.0, 0.0, 1.0]}}},
                    "payload": {
                        "chunk_id": {"string_value": "chunk-setup-0"},
                        "doc_id": {"string_value": "guide/setup"},
                        "position": {"integer_value": "0"},
                        "text": {"string_value": "Ports: the gateway listens on 8080."},
                        "content_hash": {"string_value": "b733a12a"},
                        "url": {"string_value": "https://docs.test/setup"},
                        "title": {"string_value": "Setup"},
                        "heading_path": {"string_value": "Guide > Setup > Ports"},
                        "scope_id": {"string_value": "docs"},
                        "locale": {"string_value": "en"},
                        "metadata": {
                            "struct_value": {
                                "fields": {
                                    "a=b": {"string_value": "c"},
                                    "product": {"string_value": "api"},
                                }
                            }
                        },
                        "meta": {
                            "list_value": {
                                "values": [
                                    {"string_value": "a%3Db=c"},
                                    {"string_value": "product=api"},
                                ]
                            }
                        },
                        "generation": {"integer_value": "7"},
                    },
                }
            ],
        }
    ]


def test_upsert_is_sent_in_batches(capture) -> None:
    double, _ = capture
    double.exists = True
    store = open_store(capture, batch_size=2)
    chunks = [chunk(f"chunk-{n}", n) for n in range(5)]
    store.upsert(chunks, [[1.0, 0, 0, 0]] * 5, deadline=unrequested_deadline())
    assert [len(r["points"]) for r in double.requests("Upsert")] == [2, 2, 1]


def test_update_payload_sets_fields_only_on_points_that_exist(capture, store) -> None:
    double, _ = capture
    double.stored_points = [qg.RetrievedPoint(id=qg.PointId(uuid=SETUP_0))]
    payload = ChunkPayload(
        url="https://docs.test/moved",
        title="Moved",
        heading_path="Guide > Moved",
        scope_id="docs",
        locale="de",
        metadata={},
        generation=12,
    )
    store.update_payload(
        [("chunk-setup-0", payload), ("chunk-faq-0", payload)], deadline=unrequested_deadline()
    )
    assert double.requests("GetPoints") == [
        {
            "collection_name": "rag_chunks",
            "ids": [{"uuid": SETUP_0}, {"uuid": FAQ_0}],
            "with_payload": {"enable": False},
            "with_vectors": {"enable": False},
            "timeout": "3",
        }
    ]
    assert double.requests("UpdateBatch") == [
        {
            "collection_name": "rag_chunks",
            "wait": True,
            "timeout": "3",
            "operations": [
                {
                    "set_payload": {
                        "payload": {
                            "url": {"string_value": "https://docs.test/moved"},
                            "title": {"string_value": "Moved"},
                            "heading_path": {"string_value": "Guide > Moved"},
                            "scope_id": {"string_value": "docs"},
                            "locale": {"string_value": "de"},
                            "metadata": {"struct_value": {}},
                            "meta": {"list_value": {}},
                            "generation": {"integer_value": "12"},
                        },
                        "points_selector": {"points": {"ids": [{"uuid": SETUP_0}]}},
                    }
                }
            ],
        }
    ]


def test_delete_names_the_point_uuids(capture, store) -> None:
    double, _ = capture
    store.delete(["chunk-setup-0", "chunk-setup-1"], deadline=unrequested_deadline())
    assert double.requests("Delete") == [
        {
            "collection_name": "rag_chunks",
            "wait": True,
            "timeout": "3",
            "points": {"points": {"ids": [{"uuid": SETUP_0}, {"uuid": SETUP_1}]}},
        }
    ]


# -- reads --------------------------------------------------------------------

EVERY_FILTER = ScopeFilter(
    scope_id="docs",
    locale="en",
    doc_ids=("guide/setup", "faq"),
    urls=("https://docs.test/setup",),
    metadata=(("product", "api"), ("a=b", 'c" OR 1=1')),
)
EVERY_CONDITION = {
    "must": [
        {"field": {"key": "scope_id", "match": {"keyword": "docs"}}},
        {"field": {"key": "locale", "match": {"keyword": "en"}}},
        {"field": {"key": "doc_id", "match": {"keywords": {"strings": ["guide/setup", "faq"]}}}},
        {"field": {"key": "url", "match": {"keywords": {"strings": ["https://docs.test/setup"]}}}},
        {"field": {"key": "meta", "match": {"keyword": "product=api"}}},
        {"field": {"key": "meta", "match": {"keyword": 'a%3Db=c" OR 1=1'}}},
    ]
}


# A search reads the first phase of a two-phase fetch; `get` reads whole rows.
FIRST_PHASE_PAYLOAD = {
    "include": {
        "fields": [
            "chunk_id",
            "doc_id",
            "position",
            "scope_id",
            "locale",
            "metadata",
            "generation",
        ]
    }
}


def test_search_sends_the_vector_and_every_filter(capture, store) -> None:
    double, _ = capture
    store.search([0.25, 0.5, 0, 1], 7, EVERY_FILTER, deadline=unrequested_deadline())
    [call] = [c for c in double.calls if c.method == "Query"]
    assert call.request == {
        "collection_name": "rag_chunks",
        "query": {"nearest": {"dense": {"data": [0.25, 0.5, 0.0, 1.0]}}},
        "filter": EVERY_CONDITION,
        "limit": "7",
        # Qdrant's default ef (100) loses recall at depth
        # and twice the limit rescored by the original vectors where quantized
        "params": {
            "hnsw_ef": "256",
            "exact": False,
            "quantization": {"ignore": False, "rescore": True, "oversampling": 2.0},
            "indexed_only": False,
        },
        "with_payload": FIRST_PHASE_PAYLOAD,
        "with_vectors": {"enable": False},
        "timeout": "3",
    }
    assert call.deadline_s is not None and call.deadline_s <= 3.5


def test_search_without_scope_sends_no_filter_and_orders_ties_by_chunk_id(capture, store) -> None:
    double, _ = capture
    double.scored_points = [
        qg.ScoredPoint(
            id=qg.PointId(uuid=u), score=0.5, payload={"chunk_id": qg.Value(string_value=c)}
        )
        for u, c in ((SETUP_1, "chunk-setup-1"), (SETUP_0, "chunk-setup-0"))
    ]
    hits = store.search([1, 0, 0, 0], 2, ScopeFilter(), deadline=unrequested_deadline())
    assert "filter" not in double.requests("Query")[0]
    assert [h.chunk.chunk_id for h in hits] == ["chunk-setup-0", "chunk-setup-1"]
    assert store.search([1, 0, 0, 0], 0, ScopeFilter(), deadline=unrequested_deadline()) == []
    assert len(double.requests("Query")) == 1  # limit 0 asks nothing


GENERATION_CAP = {"field": {"key": "generation", "range": {"gt": 5.0}}}


def test_visible_generation_excludes_later_rows_with_must_not(capture, store) -> None:
    # must_not(generation > 5), not must(generation <= 5): a row written
    # before generations existed has no such field and must stay visible.
    double, _ = capture
    store.search(
        [1, 0, 0, 0], 3, ScopeFilter(visible_generation=5), deadline=unrequested_deadline()
    )
    store.count(ScopeFilter(scope_id="docs", visible_generation=5), deadline=unrequested_deadline())
    store.search(
        [1, 0, 0, 0], 3, ScopeFilter(visible_generation=0), deadline=unrequested_deadline()
    )
    assert [r["filter"] for r in double.requests("Query")] == [
        {"must_not": [GENERATION_CAP]},
        {"must_not": [{"field": {"key": "generation", "range": {"gt": 0.0}}}]},
    ]
    assert [r["filter"] for r in double.requests("Count")] == [
        {
            "must": [{"field": {"key": "scope_id", "match": {"keyword": "docs"}}}],
            "must_not": [GENERATION_CAP],
        }
    ]


def test_count_and_get_requests(capture, store) -> None:
    double, _ = capture
    double.count = 3
    assert store.count(EVERY_FILTER, deadline=unrequested_deadline()) == 3
    store.get(["chunk-setup-0", "chunk-setup-0", "chunk-faq-0"], deadline=unrequested_deadline())
    assert double.requests("Count") == [
        {"collection_name": "rag_chunks", "filter": EVERY_CONDITION, "exact": True, "timeout": "3"}
    ]
    assert double.requests("GetPoints") == [
        {
            "collection_name": "rag_chunks",
            "ids": [{"uuid": SETUP_0}, {"uuid": FAQ_0}],
            "with_payload": {"enable": True},
            "with_vectors": {"enable": False},
            "timeout": "3",
        }
    ]


def retrieved(chunk_id: str, point_id: str, generation: int) -> qg.RetrievedPoint:
    payload = chunk_payload(chunk(chunk_id, generation=generation))
    return RestToGrpc.convert_record(models.Record(id=point_id, payload=payload))


def test_scan_scrolls_from_each_next_page_offset_until_there_is_none(capture, store) -> None:
    double, _ = capture
    double.scroll_pages.extend(
        [
            (
                [retrieved("chunk-setup-0", SETUP_0, 1), retrieved("chunk-setup-1", SETUP_1, 9)],
                qg.PointId(uuid=FAQ_0),
            ),
            ([retrieved("chunk-faq-0", FAQ_0, 2)], None),
        ]
    )
    pages = list(store.scan(batch=2))
    page = {
        "collection_name": "rag_chunks",
        "limit": 2,
        "with_payload": {"enable": True},
        "with_vectors": {"enable": False},
        "timeout": "3",
    }
    # No filter: a scan sees every row, whatever its generation.
    assert double.requests("Scroll") == [page, {**page, "offset": {"uuid": FAQ_0}}]
    assert pages == [
        [
            stored_chunk_from_payload(chunk_payload(chunk("chunk-setup-0", generation=1))),
            stored_chunk_from_payload(chunk_payload(chunk("chunk-setup-1", generation=9))),
        ],
        [stored_chunk_from_payload(chunk_payload(chunk("chunk-faq-0", generation=2)))],
    ]
    assert [[c.generation for c in p] for p in pages] == [[1, 9], [2]]


def test_scan_of_an_empty_collection_yields_no_page(capture, store) -> None:
    double, _ = capture
    double.scroll_pages.append(([], None))
    assert list(store.scan(batch=5)) == []
    assert len(double.requests("Scroll")) == 1


# -- faults: injected by the double -------------------------------------------


def test_transient_write_errors_are_retried(capture, store) -> None:
    double, _ = capture
    double.fail_next("Upsert", grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
    store.upsert([chunk("chunk-setup-0")], [[1.0, 0, 0, 0]], deadline=unrequested_deadline())
    assert double.methods().count("Upsert") == 3


def test_rejected_writes_fail_at_once_and_reads_are_not_retried(capture, store) -> None:
    double, _ = capture
    double.fail_next("Delete", grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(StoreError, match="qdrant delete failed"):
        store.delete(["chunk-setup-0"], deadline=unrequested_deadline())
    double.fail_next("Query", grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(StoreUnavailable, match="qdrant search failed"):
        store.search([1, 0, 0, 0], 3, ScopeFilter(), deadline=unrequested_deadline())
    assert double.methods() == ["Delete", "Query"]


def test_optimize_leaves_it_to_the_server(capture, store) -> None:
    double, _ = capture
    assert store.optimize() is False
    assert double.methods() == []  # the server's own optimizers run in the background


def test_a_closed_store_sends_nothing(capture, store) -> None:
    double, _ = capture
    store.close()
    with pytest.raises(StoreUnavailable):
        store.ping()
    assert double.methods() == []


def test_several_scopes_match_any_of_them(capture, store) -> None:
    double, _ = capture
    store.count(ScopeFilter(scope_ids=("docs", "blog")), deadline=unrequested_deadline())
    assert [r["filter"] for r in double.requests("Count")] == [
        {
            "must": [
                {"field": {"key": "scope_id", "match": {"keywords": {"strings": ["docs", "blog"]}}}}
            ]
        }
    ]


def test_vectors_are_read_without_payload(capture, store) -> None:
    double, _ = capture
    store.vectors(["chunk-setup-0", "chunk-faq-0"], deadline=unrequested_deadline())
    assert double.requests("GetPoints") == [
        {
            "collection_name": "rag_chunks",
            "ids": [{"uuid": SETUP_0}, {"uuid": FAQ_0}],
            "with_payload": {"enable": False},
            "with_vectors": {"enable": True},
            "timeout": "3",
        }
    ]


def test_a_search_takes_at_most_the_time_left_in_the_callers_deadline(capture, store) -> None:
    double, _ = capture
    store.search([0.25, 0.5, 0, 1], 7, ScopeFilter(), Deadline.after(0.3))
    [call] = [c for c in double.calls if c.method == "Query"]
    # Whole seconds (qdrant-client), rounded up from the 0.3 s left, not the store's 3 s.
    assert call.request["timeout"] == "1"
    assert call.deadline_s is not None and call.deadline_s <= 1.5
    with pytest.raises(DeadlineExceeded):
        store.search([0.25, 0.5, 0, 1], 7, ScopeFilter(), Deadline.after(-1))
    assert len([c for c in double.calls if c.method == "Query"]) == 1  # nothing sent


def test_search_many_is_one_batch_call_within_the_deadline(capture, store) -> None:
    double, _ = capture
    queries = [
        VectorQuery([0.25, 0.5, 0, 1], 7, EVERY_FILTER),
        VectorQuery([0.25, 0.5, 0, 1], 0, ScopeFilter()),  # nothing asked: not sent
        VectorQuery([1, 0, 0, 0], 3, ScopeFilter()),
    ]
    results = store.search_many(queries, Deadline.after(0.3))
    assert [len(hits) for hits in results] == [0, 0, 0]
    [call] = [c for c in double.calls if c.method == "QueryBatch"]
    assert not [c for c in double.calls if c.method == "Query"]
    assert call.request["timeout"] == "1"
    first, second = call.request["query_points"]
    assert first["filter"] == EVERY_CONDITION and first["limit"] == "7"
    assert "filter" not in second and second["limit"] == "3"
    assert first["with_payload"] == FIRST_PHASE_PAYLOAD


MOVED = ChunkPayload("https://docs.test/moved", "Moved", "Guide", "docs", "en", {}, 12)


def test_every_call_takes_at_most_the_time_left_in_the_callers_deadline(capture, store) -> None:
    double, _ = capture
    double.stored_points = [qg.RetrievedPoint(id=qg.PointId(uuid=SETUP_0))]
    left = Deadline.after(0.3)
    store.count(ScopeFilter(), left)
    store.vectors(["chunk-setup-0"], left)
    store.upsert([chunk("chunk-setup-0")], [[1.0, 0, 0, 0]], left)
    store.update_payload([("chunk-setup-0", MOVED)], left)
    store.delete(["chunk-setup-0"], left)
    methods = ["Count", "GetPoints", "Upsert", "GetPoints", "UpdateBatch", "Delete"]
    assert double.methods() == methods
    for call in double.calls:
        # Whole seconds (qdrant-client), rounded up from the 0.3 s left, not the store's 3 s:
        # the server ends the call there.
        assert call.request["timeout"] == "1", call.method
        # The channel's own deadline: the time left for reads; qdrant-client
        # gives writes its client-wide timeout (QDRANT_TIMEOUT_S) instead.
        limit = 1.5 if call.method in ("Count", "GetPoints") else 3.5
        assert call.deadline_s is not None and call.deadline_s <= limit, call.method


def test_a_passed_deadline_sends_nothing(capture, store) -> None:
    double, _ = capture
    passed = Deadline.after(-1)
    calls = [
        lambda: store.count(ScopeFilter(), passed),
        lambda: store.vectors(["chunk-setup-0"], passed),
        lambda: store.upsert([chunk("chunk-setup-0")], [[1.0, 0, 0, 0]], passed),
        lambda: store.update_payload([("chunk-setup-0", MOVED)], passed),
        lambda: store.delete(["chunk-setup-0"], passed),
    ]
    for call in calls:
        with pytest.raises(DeadlineExceeded, match="no time left"):
            call()
    assert double.methods() == []


@pytest.mark.filterwarnings("ignore::UserWarning")  # qdrant-client's version probe fails
def test_quantization_none_from_the_settings_creates_a_float32_collection(capture) -> None:
    double, port = capture
    chosen = settings(QDRANT_GRPC_PORT=port, vector_quantization="none")
    QdrantVectorStore.from_settings(chosen, DIM).close()
    [create] = double.requests("Create")
    assert "quantization_config" not in create
    assert create["vectors_config"] == {"params": {"size": "4", "distance": "Cosine"}}
