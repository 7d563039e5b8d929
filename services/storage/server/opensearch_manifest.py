"""`Manifest` in an OpenSearch index, for server mode: every Indexer replica
reads and writes the same one (OPENSEARCH_MANIFEST_INDEX, default
`rag-manifest`).

One index holds three kinds of small documents, told apart by `kind`:
`entry` (one per (doc_id, locale), the `ManifestEntry`), `intent` (one per
document of a run that has not finished: its `RunIntent` as JSON) and `meta`
(index-level key/values). Document ids are hashes of the key, so lookups are
real-time GETs and never wait for a refresh.

Atomicity differs from SQLite, by necessity: OpenSearch has no multi-document
transactions. `commit_run` writes the run's entries in bulk, then the
`committed_generation` meta document (one document: atomic), then clears the
intents. The generation is the commit point: a run that died before it is
undone by recovery from its intents, which hold the entries it replaced, so
entries written part-way are put back too.
Writes wait for a refresh (`refresh=wait_for`) so the searches behind
`keys_in_scope`, `count` and `chunk_counts_by_locale` see them at once.
A call given a deadline sends the time left as each request's timeout
(`base.call_budget_s`); `commit_run` spends it up to the commit point only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import RequestError

from services.core.deadline import Deadline
from services.storage.base import call_budget_s, unrequested_deadline
from services.storage.manifest import ManifestEntry, RunIntent, RunState
from services.storage.server.calls import ServerCallPolicy, ServerPart, batched
from services.storage.server.opensearch_client import (
    BulkAction,
    BulkWriter,
    connect_opensearch,
    is_transient_opensearch_error,
)
from services.storage.settings import RefreshPolicy, StoreSettings

Key = tuple[str, str]
Version = tuple[int, int]  # (seq_no, primary_term)
_PAGE = 1000
_BATCH = 500
_STORED_ONLY = {"type": "keyword", "index": False, "doc_values": False}

MANIFEST_MAPPINGS: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        "kind": {"type": "keyword"},
        "doc_id": {"type": "keyword"},
        "locale": {"type": "keyword"},
        "scope_id": {"type": "keyword"},
        "chunk_count": {"type": "integer"},
        "content_hash": _STORED_ONLY,
        "metadata_hash": _STORED_ONLY,
        "chunk_ids": _STORED_ONLY,
        "chunk_hashes": _STORED_ONLY,
        "updated_at": _STORED_ONLY,
        "key": {"type": "keyword"},
        "value": _STORED_ONLY,
        "generation": {"type": "long"},
    },
}
_COMMITTED = "committed_generation"


def manifest_doc_id(kind: str, *parts: str) -> str:
    # Hashed: doc ids (often URLs) can exceed OpenSearch's 512-byte _id limit.
    return f"{kind}-" + hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:40]


def _version(doc: dict[str, Any]) -> Version | None:
    if "_seq_no" in doc and "_primary_term" in doc:
        return int(doc["_seq_no"]), int(doc["_primary_term"])
    return None


def _entry_source(entry: ManifestEntry) -> dict[str, Any]:
    return {
        "kind": "entry",
        "doc_id": entry.doc_id,
        "locale": entry.locale,
        "scope_id": entry.scope_id,
        "chunk_count": len(entry.chunk_ids),
        "content_hash": entry.content_hash,
        "metadata_hash": entry.metadata_hash,
        "chunk_ids": list(entry.chunk_ids),
        "chunk_hashes": list(entry.chunk_hashes),
        "updated_at": entry.updated_at,
    }


def _entry(source: dict[str, Any]) -> ManifestEntry:
    return ManifestEntry(
        doc_id=source["doc_id"],
        locale=source["locale"],
        scope_id=source["scope_id"],
        content_hash=source["content_hash"],
        metadata_hash=source["metadata_hash"],
        chunk_ids=tuple(source.get("chunk_ids") or ()),
        chunk_hashes=tuple(source.get("chunk_hashes") or ()),
        updated_at=source.get("updated_at", ""),
    )


def _intent_id(generation: int, key: Key) -> str:
    return manifest_doc_id("intent", str(generation), *key)


def _intent_source(intent: RunIntent) -> dict[str, Any]:
    return {
        "kind": "intent",
        "generation": intent.generation,
        "doc_id": intent.doc_id,
        "locale": intent.locale,
        "value": intent.to_json(),
    }


class OpenSearchManifest(ServerPart[OpenSearch]):
    """`Manifest` shared by every Indexer replica through one OpenSearch index."""

    name = "opensearch manifest"

    def __init__(
        self,
        client: OpenSearch,
        index: str,
        timeout_s: float = 5.0,
        replicas: int = 1,
        refresh: RefreshPolicy = RefreshPolicy.WAIT_FOR,
        write_attempts: int = 4,
    ) -> None:
        self.client = client
        self._closed = False
        self.index = index
        self.timeout_s = timeout_s
        self._calls = ServerCallPolicy(
            "opensearch manifest", is_transient_opensearch_error, write_attempts
        )
        # `false` would let a sync miss documents indexed a moment ago.
        policy = RefreshPolicy.TRUE if refresh is RefreshPolicy.TRUE else RefreshPolicy.WAIT_FOR
        self._bulk = BulkWriter(client, self._calls, index, policy.value, timeout_s)
        self._calls.write(
            "ensure index", partial(self._ensure_index, replicas), unrequested_deadline()
        )

    @classmethod
    def from_settings(cls, settings: StoreSettings) -> OpenSearchManifest:
        return cls(
            connect_opensearch(settings),
            settings.opensearch_manifest_index,
            timeout_s=settings.opensearch_timeout_s,
            replicas=settings.opensearch_replicas,
            refresh=settings.opensearch_refresh,
        )

    def _ensure_index(self, replicas: int) -> None:
        if self._live().indices.exists(index=self.index, request_timeout=self.timeout_s):
            # Adding a field is allowed on a live index: one made before run
            # intents existed gains `generation` here.
            self._live().indices.put_mapping(
                index=self.index, body=MANIFEST_MAPPINGS, request_timeout=self.timeout_s
            )
            return
        body = {
            # Small and read by key: one shard is plenty; replicas for availability.
            "settings": {"index": {"number_of_shards": 1, "number_of_replicas": replicas}},
            "mappings": MANIFEST_MAPPINGS,
        }
        try:
            self._live().indices.create(index=self.index, body=body, request_timeout=self.timeout_s)
        except RequestError as exc:
            if exc.error != "resource_already_exists_exception":  # lost a benign race
                raise

    # -- entries --------------------------------------------------------------

    def get(self, doc_id: str, locale: str, deadline: Deadline) -> ManifestEntry | None:
        return self.get_many([(doc_id, locale)], deadline).get((doc_id, locale))

    def get_many(self, keys: Sequence[Key], deadline: Deadline) -> dict[Key, ManifestEntry]:
        found: dict[Key, ManifestEntry] = {}
        ids = [manifest_doc_id("entry", *key) for key in keys]
        for source in self._sources(ids, deadline).values():
            entry = _entry(source)
            found[(entry.doc_id, entry.locale)] = entry
        return found

    def put_many(self, entries: Sequence[ManifestEntry], deadline: Deadline) -> None:
        actions = [
            BulkAction("index", manifest_doc_id("entry", e.doc_id, e.locale), _entry_source(e))
            for e in entries
        ]
        self._write("put entries", actions, deadline)

    def delete_many(self, keys: Sequence[Key], deadline: Deadline) -> None:
        actions = [BulkAction("delete", manifest_doc_id("entry", *k)) for k in keys]
        self._write("delete entries", actions, deadline)

    def entries(self) -> Iterable[ManifestEntry]:
        fields = ["doc_id", "locale"]
        query = {"term": {"kind": "entry"}}
        # An audit's whole scan: each page under the manifest's own timeout.
        sources = self._scan(query, fields, include_all=True, deadline=Deadline.never())
        return [_entry(source) for source in sources]

    # -- run intents ----------------------------------------------------------

    def begin_run(self, intents: Sequence[RunIntent], deadline: Deadline) -> None:
        actions = [
            BulkAction("index", _intent_id(i.generation, i.key), _intent_source(i)) for i in intents
        ]
        self._write("begin run", actions, deadline)

    def open_intents(self, deadline: Deadline) -> list[RunIntent]:
        query = {"term": {"kind": "intent"}}
        fields = ["generation", "doc_id", "locale"]
        sources = self._scan(query, fields, include_all=True, deadline=deadline)
        return [RunIntent.from_json(source["value"]) for source in sources]

    def run_state(self, deadline: Deadline) -> RunState:
        """Two requests (a multi-get and the intents' scan): OpenSearch has
        no read of both in one."""
        committed = int(self.get_meta(_COMMITTED, deadline) or 0)
        return RunState(committed, tuple(self.open_intents(deadline)))

    def commit_run(
        self,
        generation: int,
        entries: Sequence[ManifestEntry],
        removed: Sequence[Key],
        deadline: Deadline,
        meta: Mapping[str, str] | None = None,
    ) -> None:
        self.put_many(entries, deadline)
        self.delete_many(removed, deadline)
        # The commit point, with `meta` in the same bulk request before it.
        values = [*(meta or {}).items(), (_COMMITTED, str(generation))]
        self._bulk.write("commit", [_meta_action(k, v) for k, v in values], frozenset(), deadline)
        # Not under the run's deadline: the run has committed, and a deadline
        # that passed now would report it as failed (and have it undone); its
        # intents are clearable by the store's own timeout, or by recovery.
        self.clear_intents(generation, unrequested_deadline())

    def clear_intents(self, generation: int, deadline: Deadline) -> None:
        query = {
            "bool": {"filter": [{"term": {"kind": "intent"}}, {"term": {"generation": generation}}]}
        }
        found = self._scan(query, ["doc_id", "locale"], deadline=deadline)
        keys = [(s["doc_id"], s["locale"]) for s in found]
        actions = [BulkAction("delete", _intent_id(generation, k)) for k in keys]
        self._write("clear intents", actions, deadline)

    def _write(self, action: str, actions: list[BulkAction], deadline: Deadline) -> None:
        for batch in batched(actions, _BATCH):
            self._bulk.write(action, batch, frozenset({404}), deadline)

    def keys_in_scope(self, scope_id: str, deadline: Deadline) -> Iterable[Key]:
        query = {
            "bool": {"filter": [{"term": {"kind": "entry"}}, {"term": {"scope_id": scope_id}}]}
        }
        sources = self._scan(query, ["doc_id", "locale"], deadline=deadline)
        return [(s["doc_id"], s["locale"]) for s in sources]

    def locales_of(self, doc_id: str, deadline: Deadline) -> list[str]:
        query = {"bool": {"filter": [{"term": {"kind": "entry"}}, {"term": {"doc_id": doc_id}}]}}
        return [s["locale"] for s in self._scan(query, ["locale"], deadline=deadline)]

    def count(self, deadline: Deadline) -> int:
        body = {"query": {"term": {"kind": "entry"}}}
        timeout_s = self._timeout(deadline, "a count")
        count = partial(self._live().count, index=self.index, body=body, request_timeout=timeout_s)
        return int(self._calls.read("count", count)["count"])

    def chunk_counts_by_locale(self, deadline: Deadline) -> dict[str, int]:
        body = {
            "size": 0,
            "query": {"term": {"kind": "entry"}},
            "aggs": {
                "locales": {
                    "terms": {"field": "locale", "size": 10_000},
                    "aggs": {"chunks": {"sum": {"field": "chunk_count"}}},
                }
            },
        }
        timeout_s = self._timeout(deadline, "a read")
        search = partial(
            self._live().search, index=self.index, body=body, request_timeout=timeout_s
        )
        buckets = self._calls.read("chunk counts", search)["aggregations"]["locales"]["buckets"]
        return {b["key"]: int(b["chunks"]["value"]) for b in buckets}

    def locales_in(
        self, scope_ids: Sequence[str], doc_ids: Sequence[str], deadline: Deadline
    ) -> list[str]:
        filters: list[dict[str, Any]] = [
            {"term": {"kind": "entry"}},
            {"range": {"chunk_count": {"gt": 0}}},
        ]
        filters += [
            {"terms": {f: list(v)}} for f, v in (("scope_id", scope_ids), ("doc_id", doc_ids)) if v
        ]
        body = {
            "size": 0,
            "query": {"bool": {"filter": filters}},
            "aggs": {"locales": {"terms": {"field": "locale", "size": 10_000}}},
        }
        timeout_s = self._timeout(deadline, "a read")
        search = partial(
            self._live().search, index=self.index, body=body, request_timeout=timeout_s
        )
        buckets = self._calls.read("locales in scope", search)["aggregations"]["locales"]["buckets"]
        return sorted(b["key"] for b in buckets)

    # -- index-level values ---------------------------------------------------

    def get_meta(self, key: str, deadline: Deadline) -> str | None:
        doc_id = manifest_doc_id("meta", key)
        source = self._sources([doc_id], deadline).get(doc_id)
        return None if source is None else str(source["value"])

    def set_meta(self, key: str, value: str, deadline: Deadline) -> None:
        self._bulk.write("set meta", [_meta_action(key, value)], frozenset(), deadline)

    # -- helpers --------------------------------------------------------------

    def _sources(self, ids: list[str], deadline: Deadline) -> dict[str, dict[str, Any]]:
        versioned = self._versioned_sources(ids, deadline)
        return {doc_id: source for doc_id, (source, _) in versioned.items()}

    def _versioned_sources(
        self, ids: list[str], deadline: Deadline
    ) -> dict[str, tuple[dict[str, Any], Version | None]]:
        """Real-time multi-get: id → (source, (seq_no, primary_term)) of found docs."""
        found: dict[str, tuple[dict[str, Any], Version | None]] = {}
        for batch in batched(list(dict.fromkeys(ids)), _BATCH):
            mget = partial(
                self._live().mget,
                index=self.index,
                body={"ids": batch},
                request_timeout=self._timeout(deadline, "a read"),
            )
            for doc in self._calls.read("get", mget)["docs"]:
                if doc.get("found"):
                    found[doc["_id"]] = (doc["_source"], _version(doc))
        return found

    def _timeout(self, deadline: Deadline, what: str) -> float:
        """A request's timeout: the time left in `deadline`, at most the manifest's."""
        return call_budget_s(self.name, deadline, self.timeout_s, what)

    def _scan(
        self,
        query: dict[str, Any],
        fields: list[str],
        *,
        include_all: bool = False,
        deadline: Deadline,
    ) -> Iterator[dict[str, Any]]:
        """Every matching document's `fields` (or whole source), sorted by
        `fields`, paged by search_after."""
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": _PAGE,
                "query": query,
                "_source": True if include_all else fields,
                "sort": [{field: "asc"} for field in fields],
                "track_total_hits": False,
            }
            if after is not None:
                body["search_after"] = after
            timeout_s = self._timeout(deadline, "a scan")
            search = partial(
                self._live().search, index=self.index, body=body, request_timeout=timeout_s
            )
            hits = self._calls.read("scan", search)["hits"]["hits"]
            yield from (hit["_source"] for hit in hits)
            if len(hits) < _PAGE:
                return
            after = hits[-1]["sort"]


def _meta_action(key: str, value: str) -> BulkAction:
    return BulkAction(
        "index", manifest_doc_id("meta", key), {"kind": "meta", "key": key, "value": value}
    )
