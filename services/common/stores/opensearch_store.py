"""`LexicalStore` on an OpenSearch cluster (server mode), via opensearch-py.

Mirrors the embedded tantivy store (`tantivy_store`, `tantivy_query`): the same
fields; the same analysis (words split at every non-alphanumeric character,
tokens over 40 characters dropped, lowercase, Porter2/Snowball English
stemming, no stop-word list, so "to be or not to be" still finds something);
the same field weights (title ×2, heading_path ×1.5, text ×1, per-field scores
summed); identifier phrases for pieces like `text-embedding-v4`; keyword
filters in filter context (they narrow candidates and never move BM25
scores); ties broken by chunk_id.

User text only ever travels as the `query` value of `multi_match` and
`match_phrase` clauses, which analyze it as plain text: no query-string syntax exists on this path,
so `title:x OR "a`, `*` or `\\` can neither change the query nor fail it.

Index settings and mappings come from an index template (`<index>-template`,
matching exactly `<index>`; a wildcard would overlap the template of the next
blue/green index and OpenSearch refuses overlapping templates of equal
priority), rewritten at every start. Refresh policy: see `RefreshPolicy` and
deploy/README.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import RequestError

from services.common.errors import ConfigError, StoreUnavailable
from services.common.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.common.stores.opensearch_client import (
    BulkAction,
    BulkWriter,
    connect_opensearch,
    is_transient_opensearch_error,
)
from services.common.stores.payload import (
    METADATA_TERMS_FIELD,
    chunk_payload,
    metadata_from_terms,
    metadata_term,
    payload_fields,
)
from services.common.stores.server_calls import ServerCallPolicy, batched
from services.common.stores.settings import RefreshPolicy, StoreSettings
from services.common.stores.tantivy_query import FIELD_BOOSTS, MAX_PHRASES, MAX_TERMS

ANALYZER = "rag_english"
SIMILARITY = "rag_bm25"
KEYWORD_FIELDS = ("chunk_id", "doc_id", "url", "scope_id", "locale", METADATA_TERMS_FIELD)
# A piece with punctuation between word characters is an identifier
# (`chunkSize=800`, `v1.2`): it also gets a phrase clause, as in tantivy_query.
_IDENTIFIER = re.compile(r"\w[^\w\s]+\w")


def index_template(index: str, shards: int, replicas: int) -> dict[str, Any]:
    text_field = {"type": "text", "analyzer": ANALYZER, "similarity": SIMILARITY}
    return {
        "index_patterns": [index],
        "priority": 100,
        "template": {
            "settings": {
                "index": {
                    "number_of_shards": shards,
                    "number_of_replicas": replicas,
                    "refresh_interval": "1s",
                },
                "similarity": {SIMILARITY: {"type": "BM25", "k1": 1.2, "b": 0.75}},
                "analysis": {
                    # Mirrors tantivy's en_stem: split at every non-alphanumeric
                    # character (so `title:x` is two words, unlike the standard
                    # tokenizer), drop tokens over 40 chars, lowercase, stem.
                    "tokenizer": {"rag_words": {"type": "pattern", "pattern": "[^\\p{L}\\p{N}]+"}},
                    "filter": {
                        "rag_max_token": {"type": "length", "max": 40},
                        "rag_stemmer": {"type": "stemmer", "language": "porter2"},
                    },
                    "analyzer": {
                        ANALYZER: {
                            "type": "custom",
                            "tokenizer": "rag_words",
                            "filter": ["rag_max_token", "lowercase", "rag_stemmer"],
                        }
                    },
                },
            },
            "mappings": {
                # strict: a field outside this layout is a bug, not a new column.
                "dynamic": "strict",
                "properties": {
                    **{field: {"type": "keyword"} for field in KEYWORD_FIELDS},
                    "content_hash": {"type": "keyword", "index": False},
                    "position": {"type": "integer"},
                    **{field: dict(text_field) for field in FIELD_BOOSTS},
                },
            },
        },
    }


def lexical_query(text: str, boosts: Mapping[str, float] = FIELD_BOOSTS) -> dict[str, Any] | None:
    """The scoring part of a search: None when the text has no pieces at all.

    Every clause is a `should`, so per-field and per-phrase scores add up as
    in tantivy_query (`most_fields` sums the per-field matches)."""
    pieces = list(dict.fromkeys(text.split()))[:MAX_TERMS]
    if not pieces:
        return None
    should: list[dict[str, Any]] = [
        {
            "multi_match": {
                "query": " ".join(pieces),
                "type": "most_fields",
                "fields": [f"{field}^{boost:g}" for field, boost in boosts.items()],
            }
        }
    ]
    identifiers = [piece for piece in pieces if _IDENTIFIER.search(piece)][:MAX_PHRASES]
    should.extend(
        {"match_phrase": {field: {"query": piece, "boost": boost}}}
        for piece in identifiers
        for field, boost in boosts.items()
    )
    return {"bool": {"should": should, "minimum_should_match": 1}}


def scope_filters(scope: ScopeFilter | None) -> list[dict[str, Any]]:
    """ScopeFilter as filter-context clauses that must all match."""
    if scope is None or scope.is_empty():
        return []
    clauses: list[dict[str, Any]] = []
    if scope.scope_id:
        clauses.append({"term": {"scope_id": scope.scope_id}})
    if scope.locale:
        clauses.append({"term": {"locale": scope.locale}})
    if scope.doc_ids:
        clauses.append({"terms": {"doc_id": list(scope.doc_ids)}})
    if scope.urls:
        clauses.append({"terms": {"url": list(scope.urls)}})
    for key, value in scope.metadata:
        clauses.append({"term": {METADATA_TERMS_FIELD: metadata_term(key, value)}})
    return clauses


def lexical_source(fields: dict[str, Any]) -> dict[str, Any]:
    """Vector payload fields minus the metadata object: the index keeps only
    the `meta` terms (a partial update replaces a list but would merge an
    object, leaving removed keys behind)."""
    return {key: value for key, value in fields.items() if key != "metadata"}


def stored_chunk_from_source(source: dict[str, Any]) -> StoredChunk:
    return StoredChunk(
        chunk_id=str(source["chunk_id"]),
        doc_id=str(source.get("doc_id", "")),
        position=int(source.get("position", 0)),
        text=str(source.get("text", "")),
        url=str(source.get("url", "")),
        title=str(source.get("title", "")),
        heading_path=str(source.get("heading_path", "")),
        scope_id=str(source.get("scope_id", "")),
        locale=str(source.get("locale", "")),
        content_hash=str(source.get("content_hash", "")),
        metadata=metadata_from_terms(source.get(METADATA_TERMS_FIELD) or []),
    )


class OpenSearchLexicalStore:
    """BM25 over title + heading_path + text in one OpenSearch index."""

    name = "opensearch"

    def __init__(
        self,
        client: OpenSearch,
        index: str,
        timeout_s: float = 5.0,
        refresh: RefreshPolicy = RefreshPolicy.WAIT_FOR,
        shards: int = 1,
        replicas: int = 1,
        batch_size: int = 500,
        write_attempts: int = 4,
        field_boosts: Mapping[str, float] = FIELD_BOOSTS,
    ) -> None:
        self.client = client
        self.field_boosts = dict(field_boosts)
        self._closed = False
        self.index = index
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self._calls = ServerCallPolicy("opensearch", is_transient_opensearch_error, write_attempts)
        self._bulk = BulkWriter(client, self._calls, index, refresh.value, timeout_s)
        self._calls.write("ensure index", partial(self._ensure_index, shards, replicas))

    @classmethod
    def from_settings(cls, settings: StoreSettings) -> OpenSearchLexicalStore:
        return cls(
            connect_opensearch(settings),
            settings.opensearch_index,
            timeout_s=settings.opensearch_timeout_s,
            refresh=settings.opensearch_refresh,
            shards=settings.opensearch_shards,
            replicas=settings.opensearch_replicas,
            field_boosts=settings.lexical_field_boosts,
        )

    # -- index lifecycle ------------------------------------------------------

    def _ensure_index(self, shards: int, replicas: int) -> None:
        # The template is (re)written on every start so mapping fixes ship with
        # the code; it only affects indices created afterwards.
        self._live().indices.put_index_template(
            name=f"{self.index}-template",
            body=index_template(self.index, shards, replicas),
            request_timeout=self.timeout_s,
        )
        if not self._live().indices.exists(index=self.index, request_timeout=self.timeout_s):
            try:
                self._live().indices.create(index=self.index, request_timeout=self.timeout_s)
            except RequestError as exc:
                if exc.error != "resource_already_exists_exception":  # lost a benign race
                    raise
        self._check_mapping()

    def _check_mapping(self) -> None:
        mappings = self._live().indices.get_mapping(
            index=self.index, request_timeout=self.timeout_s
        )
        for concrete, body in mappings.items():
            properties = body.get("mappings", {}).get("properties", {})
            wrong = [
                field
                for field, kind in (("text", "text"), ("chunk_id", "keyword"), ("meta", "keyword"))
                if properties.get(field, {}).get("type") != kind
            ]
            if wrong:
                raise ConfigError(
                    f"OpenSearch index {concrete!r} (OPENSEARCH_INDEX) was not created with this "
                    f"service's mapping (fields {wrong} differ); point OPENSEARCH_INDEX at a new "
                    "index and re-index (see deploy/README.md)"
                )

    # -- writes ---------------------------------------------------------------

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        actions = [
            BulkAction("index", chunk.chunk_id, lexical_source(chunk_payload(chunk)))
            for chunk in chunks
        ]
        for batch in batched(actions, self.batch_size):
            self._bulk.write("upsert", batch, ignored_status=frozenset())

    def update_payload(self, updates: Sequence[tuple[str, ChunkPayload]]) -> None:
        """Rewrite the non-text fields of existing chunks; unknown ids are
        ignored (404 document_missing), as in the embedded store."""
        actions = [
            BulkAction("update", chunk_id, {"doc": lexical_source(payload_fields(payload))})
            for chunk_id, payload in updates
        ]
        for batch in batched(actions, self.batch_size):
            self._bulk.write("update payload", batch, ignored_status=frozenset({404}))

    def delete(self, chunk_ids: Sequence[str]) -> None:
        actions = [BulkAction("delete", chunk_id) for chunk_id in dict.fromkeys(chunk_ids)]
        for batch in batched(actions, self.batch_size):
            self._bulk.write("delete", batch, ignored_status=frozenset({404}))

    # -- reads ----------------------------------------------------------------

    def search(self, query: str, limit: int, scope: ScopeFilter) -> list[ScoredChunk]:
        scoring = lexical_query(query, self.field_boosts)
        if limit <= 0 or scoring is None:
            return []
        body = {
            "size": limit,
            "query": {"bool": {"must": [scoring], "filter": scope_filters(scope)}},
            "sort": [{"_score": "desc"}, {"chunk_id": "asc"}],
            "track_scores": True,
            "track_total_hits": False,
        }
        search = partial(
            self._live().search, index=self.index, body=body, request_timeout=self.timeout_s
        )
        hits = self._calls.read("search", search)["hits"]["hits"]
        return [
            ScoredChunk(stored_chunk_from_source(hit["_source"]), float(hit["_score"]))
            for hit in hits
        ]

    def get(self, chunk_ids: Sequence[str]) -> list[StoredChunk]:
        found: list[StoredChunk] = []
        for batch in batched(list(dict.fromkeys(chunk_ids)), self.batch_size):
            mget = partial(
                self._live().mget,
                index=self.index,
                body={"ids": batch},
                request_timeout=self.timeout_s,
            )
            docs = self._calls.read("get", mget)["docs"]
            found.extend(stored_chunk_from_source(d["_source"]) for d in docs if d.get("found"))
        return found

    def count(self, scope: ScopeFilter | None = None) -> int:
        body = {"query": {"bool": {"filter": scope_filters(scope)}}}
        count = partial(
            self._live().count, index=self.index, body=body, request_timeout=self.timeout_s
        )
        return int(self._calls.read("count", count)["count"])

    def ping(self) -> None:
        health = partial(
            self._live().cluster.health, index=self.index, request_timeout=self.timeout_s
        )
        status = self._calls.read("ping", health).get("status")
        if status not in ("green", "yellow"):
            # red: some primary shard of the index is unassigned, searches would be partial.
            raise StoreUnavailable(f"opensearch index {self.index!r} health is {status}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.close()

    def _live(self) -> OpenSearch:
        if self._closed:
            raise StoreUnavailable(f"{self.name}: store is closed")
        return self.client
