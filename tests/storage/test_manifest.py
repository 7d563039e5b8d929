"""OpenSearchManifest: the shared Manifest contract (on SQLite always, on
OpenSearch when OPENSEARCH_URL points at a live cluster, skipped with the
reason otherwise) and the exact requests it sends, captured below the real
client's transport by a request-capture double."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded
from services.runtime.settings import load_settings
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.server.opensearch_client import connect_opensearch
from services.storage.server.opensearch_manifest import OpenSearchManifest, manifest_doc_id
from services.storage.settings import StoreSettings
from tests.storage.manifest_contract import ManifestContract, entry, intent
from tests.storage.opensearch_capture import (
    CaptureConnection,
    CapturedRequest,
    OpenSearchCapture,
    bulk_ok,
    capture_settings,
)

pytestmark = pytest.mark.unit
INDEX = "rag-manifest"
LIVE_REASON = "OpenSearchManifest: set OPENSEARCH_URL to a live cluster to run this suite"


# -- the contract --------------------------------------------------------------


class TestSqliteManifestContract(ManifestContract):
    @pytest.fixture
    def manifest_factory(self):
        return SqliteManifest


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("OPENSEARCH_URL"), reason=LIVE_REASON)
class TestOpenSearchManifestContract(ManifestContract):
    @pytest.fixture
    def manifest_factory(self):
        settings = load_settings(
            StoreSettings, store_mode="server", QDRANT_URL="http://unused.invalid"
        )
        created: list[str] = []

        def open_manifest(path: Path) -> OpenSearchManifest:
            index = "rag-manifest-test-" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
            created.append(index)
            return OpenSearchManifest(connect_opensearch(settings), index, replicas=0)

        yield open_manifest
        client = connect_opensearch(settings)
        for index in set(created):
            client.indices.delete(index=index, ignore_unavailable=True)
        client.close()


# -- request shapes ------------------------------------------------------------


def entry_id(doc_id: str, locale: str = "en") -> str:
    return manifest_doc_id("entry", doc_id, locale)


@pytest.fixture
def capture() -> OpenSearchCapture:
    double = OpenSearchCapture()
    double.on("HEAD", f"/{INDEX}", (200, {}))
    double.on_call("POST", f"/{INDEX}/_bulk", lambda r: (200, bulk_ok(r.body)))
    return double


def open_manifest(capture: OpenSearchCapture) -> OpenSearchManifest:
    client = connect_opensearch(
        capture_settings(), connection_class=CaptureConnection, capture=capture
    )
    manifest = OpenSearchManifest(client, INDEX, timeout_s=2.5, replicas=1)
    capture.requests.clear()
    return manifest


def test_ids_are_hashed_keys_that_fit_any_doc_id() -> None:
    assert manifest_doc_id("entry", "guide", "en") == manifest_doc_id("entry", "guide", "en")
    assert manifest_doc_id("entry", "a", "b-c") != manifest_doc_id("entry", "a-b", "c")
    assert len(manifest_doc_id("entry", "x" * 5000, "en")) == len("entry-") + 40


def test_a_missing_index_is_created_with_strict_mappings(capture) -> None:
    capture.on("HEAD", f"/{INDEX}", (404, {}))
    stored_only = {"type": "keyword", "index": False, "doc_values": False}
    client = connect_opensearch(
        capture_settings(), connection_class=CaptureConnection, capture=capture
    )
    OpenSearchManifest(client, INDEX, replicas=2)
    assert capture.bodies("PUT", f"/{INDEX}") == [
        {
            "settings": {"index": {"number_of_shards": 1, "number_of_replicas": 2}},
            "mappings": {
                "dynamic": "strict",
                "properties": {
                    "kind": {"type": "keyword"},
                    "doc_id": {"type": "keyword"},
                    "locale": {"type": "keyword"},
                    "scope_id": {"type": "keyword"},
                    "chunk_count": {"type": "integer"},
                    "content_hash": stored_only,
                    "metadata_hash": stored_only,
                    "chunk_ids": stored_only,
                    "chunk_hashes": stored_only,
                    "updated_at": stored_only,
                    "key": {"type": "keyword"},
                    "value": stored_only,
                    "generation": {"type": "long"},
                },
            },
        }
    ]


def test_put_many_writes_entries_in_one_bulk(capture) -> None:
    open_manifest(capture).put_many([entry("guide", chunks=1)], deadline=unrequested_deadline())
    [request] = capture.requests
    assert request.params == {"refresh": "wait_for"}
    assert request.body == [
        {"index": {"_id": entry_id("guide")}},
        {
            "kind": "entry",
            "doc_id": "guide",
            "locale": "en",
            "scope_id": "docs",
            "chunk_count": 1,
            "content_hash": "content-guide",
            "metadata_hash": "meta-guide",
            "chunk_ids": ["guide#0"],
            "chunk_hashes": ["hash-guide-0"],
            "updated_at": "2026-01-02T03:04:05Z",
        },
    ]


def test_reads_by_key_are_realtime_gets(capture) -> None:
    capture.on("POST", f"/{INDEX}/_mget", (200, {"docs": [{"_id": entry_id("a"), "found": False}]}))
    manifest = open_manifest(capture)
    assert manifest.get_many([("a", "en"), ("a", "en")], deadline=unrequested_deadline()) == {}
    assert capture.bodies("POST", f"/{INDEX}/_mget") == [{"ids": [entry_id("a")]}]


def test_keys_in_scope_pages_with_search_after(capture) -> None:
    def page(request: CapturedRequest) -> tuple[int, Any]:
        start = 0 if "search_after" not in request.body else 1000
        count = 1000 if start == 0 else 3
        hits = [
            {"_source": {"doc_id": f"d{n:05}", "locale": "en"}, "sort": [f"d{n:05}", "en"]}
            for n in range(start, start + count)
        ]
        return 200, {"hits": {"hits": hits}}

    capture.on_call("POST", f"/{INDEX}/_search", page)
    keys = list(open_manifest(capture).keys_in_scope("docs", deadline=unrequested_deadline()))
    assert len(keys) == 1003 and keys[-1] == ("d01002", "en")
    first, second = capture.bodies("POST", f"/{INDEX}/_search")
    assert first == {
        "size": 1000,
        "query": {
            "bool": {"filter": [{"term": {"kind": "entry"}}, {"term": {"scope_id": "docs"}}]}
        },
        "_source": ["doc_id", "locale"],
        "sort": [{"doc_id": "asc"}, {"locale": "asc"}],
        "track_total_hits": False,
    }
    assert second == {**first, "search_after": ["d00999", "en"]}


def test_chunk_counts_use_one_aggregation(capture) -> None:
    buckets = [{"key": "en", "chunks": {"value": 6.0}}, {"key": "de", "chunks": {"value": 5.0}}]
    capture.on(
        "POST", f"/{INDEX}/_search", (200, {"aggregations": {"locales": {"buckets": buckets}}})
    )
    assert open_manifest(capture).chunk_counts_by_locale(deadline=unrequested_deadline()) == {
        "en": 6,
        "de": 5,
    }
    assert capture.bodies("POST", f"/{INDEX}/_search") == [
        {
            "size": 0,
            "query": {"term": {"kind": "entry"}},
            "aggs": {
                "locales": {
                    "terms": {"field": "locale", "size": 10000},
                    "aggs": {"chunks": {"sum": {"field": "chunk_count"}}},
                }
            },
        }
    ]


def test_locales_in_a_scope_are_one_aggregation_within_the_deadline(capture) -> None:
    buckets = [{"key": "zh-CN", "doc_count": 3}, {"key": "en", "doc_count": 2}]
    capture.on(
        "POST", f"/{INDEX}/_search", (200, {"aggregations": {"locales": {"buckets": buckets}}})
    )
    manifest = open_manifest(capture)
    assert manifest.locales_in(["site"], ["a", "b"], Deadline.after(0.8)) == ["en", "zh-CN"]
    assert manifest.locales_in([], [], Deadline.after(30)) == ["en", "zh-CN"]
    narrowed, everything = capture.bodies("POST", f"/{INDEX}/_search")
    entries_with_chunks = [{"term": {"kind": "entry"}}, {"range": {"chunk_count": {"gt": 0}}}]
    assert narrowed == {
        "size": 0,
        "query": {
            "bool": {
                "filter": [
                    *entries_with_chunks,
                    {"terms": {"scope_id": ["site"]}},
                    {"terms": {"doc_id": ["a", "b"]}},
                ]
            }
        },
        "aggs": {"locales": {"terms": {"field": "locale", "size": 10000}}},
    }
    assert everything["query"] == {"bool": {"filter": entries_with_chunks}}
    first, second = (r.timeout for r in capture.requests)
    assert first is not None and first <= 0.8 and second == 2.5


def test_begin_run_writes_one_intent_document_per_document(capture) -> None:
    run = intent(5, "a", old=entry("a"))
    open_manifest(capture).begin_run([run], deadline=unrequested_deadline())
    assert capture.bodies("POST", f"/{INDEX}/_bulk") == [
        [
            {"index": {"_id": manifest_doc_id("intent", "5", "a", "en")}},
            {
                "kind": "intent",
                "generation": 5,
                "doc_id": "a",
                "locale": "en",
                "value": run.to_json(),
            },
        ]
    ]


def test_commit_run_writes_entries_then_the_commit_point_then_clears_intents(capture) -> None:
    capture.on(
        "POST",
        f"/{INDEX}/_search",
        (
            200,
            {"hits": {"hits": [{"_source": {"doc_id": "a", "locale": "en"}, "sort": ["a", "en"]}]}},
        ),
    )
    open_manifest(capture).commit_run(
        5, [entry("a", chunks=1)], [("gone", "en")], deadline=unrequested_deadline()
    )
    bulks = capture.bodies("POST", f"/{INDEX}/_bulk")
    assert [next(iter(b[0])) for b in bulks] == ["index", "delete", "index", "delete"]
    assert bulks[1] == [{"delete": {"_id": entry_id("gone")}}]
    assert bulks[2][1] == {"kind": "meta", "key": "committed_generation", "value": "5"}
    assert bulks[3] == [{"delete": {"_id": manifest_doc_id("intent", "5", "a", "en")}}]
    [search] = capture.bodies("POST", f"/{INDEX}/_search")
    assert search["query"] == {
        "bool": {"filter": [{"term": {"kind": "intent"}}, {"term": {"generation": 5}}]}
    }


def test_meta_values_are_documents_keyed_by_name(capture) -> None:
    meta_id = manifest_doc_id("meta", "chunking")
    found = {
        "_id": meta_id,
        "found": True,
        "_source": {"kind": "meta", "key": "chunking", "value": "{}"},
    }
    capture.on("POST", f"/{INDEX}/_mget", (200, {"docs": [found]}))
    manifest = open_manifest(capture)
    manifest.set_meta("chunking", "{}", deadline=unrequested_deadline())
    assert manifest.get_meta("chunking", deadline=unrequested_deadline()) == "{}"
    assert capture.bodies("POST", f"/{INDEX}/_bulk") == [
        [{"index": {"_id": meta_id}}, {"kind": "meta", "key": "chunking", "value": "{}"}]
    ]


def test_calls_take_at_most_the_time_left_and_a_commit_only_up_to_its_commit_point(
    capture,
) -> None:
    capture.on("POST", f"/{INDEX}/_mget", (200, {"docs": []}))
    manifest = open_manifest(capture)
    left = Deadline.after(0.8)
    manifest.get_many([("a", "en")], left)
    manifest.get_meta("chunking", left)
    manifest.begin_run([intent(5, "a")], left)
    assert len(capture.requests) == 3
    capture.on(
        "POST",
        f"/{INDEX}/_search",
        (200, {"hits": {"hits": [{"_source": {"doc_id": "a", "locale": "en"}, "sort": ["a"]}]}}),
    )
    manifest.commit_run(5, [entry("a")], [("gone", "en")], left)
    steps = [(r.method, r.path, r.timeout) for r in capture.requests]
    bounded = [(method, path) for method, path, timeout in steps if timeout and timeout <= 0.8]
    # Entries, removals and the commit point within the deadline (not the
    # manifest's 2.5 s); clearing the committed run's intents is not cut short.
    assert bounded == [("POST", f"/{INDEX}/_mget")] * 2 + [("POST", f"/{INDEX}/_bulk")] * 4
    assert steps[-2:] == [
        ("POST", f"/{INDEX}/_search", 2.5),
        ("POST", f"/{INDEX}/_bulk", 2.5),
    ]


def test_a_passed_deadline_sends_nothing(capture) -> None:
    manifest = open_manifest(capture)
    passed = Deadline.after(-1)
    calls = [
        lambda: manifest.get_many([("a", "en")], passed),
        lambda: manifest.get_meta("chunking", passed),
        lambda: manifest.locales_in(["docs"], [], passed),
        lambda: manifest.put_many([entry("a")], passed),
        lambda: manifest.begin_run([intent(5, "a")], passed),
        lambda: manifest.commit_run(5, [entry("a")], [], passed),
        lambda: manifest.clear_intents(5, passed),
        lambda: manifest.set_meta("chunking", "{}", passed),
    ]
    for call in calls:
        with pytest.raises(DeadlineExceeded, match="no time left"):
            call()
    assert capture.requests == []
