"""`LexicalStore` on an OpenSearch cluster (server mode), via opensearch-py.

Mirrors the embedded tantivy store (`tantivy_store`; the shared layout and
scoring are in `lexical_fields`): the service's analyzer
(`services.core.analysis`) turns every text field into a space-separated
term string, and the index's only text analyzer, `rag_terms`, is a
`whitespace` tokenizer without filters, so OpenSearch indexes exactly the
token stream tantivy indexes (identical by construction, Chinese included:
no OpenSearch plugin segments like jieba, and a mirrored pair of analyzers
drifts). The same field weights (`RAG_LEXICAL_*_BOOST`, by default
`FIELD_BOOSTS`: title ×0.5, heading_path ×0.5, text ×1; per-field scores
summed by `most_fields`); phrases for identifier pieces like
`text-embedding-v4`; a `constant_score` boost per exact identifier, then
`exact_first` ordering; keyword filters in filter context (they narrow
candidates and never move BM25 scores); ties broken by chunk_id.

User text never reaches a query-string parser: the analyzer's terms travel
as the `query` of `multi_match` / `match_phrase` clauses (analyzed by
`rag_terms`, i.e. split at spaces) and identifiers as `term` values, so
`title:x OR "a`, `*` or `\\` can neither change the query nor fail it.

Index settings and mappings come from an index template (`<index>-template`,
matching exactly `<index>`; a wildcard would overlap the template of the next
blue/green index and OpenSearch refuses overlapping templates of equal
priority), rewritten at every start. The mapping's `_meta.analysis` records
the analysis version; an index built by another one is refused at start-up
with the re-index path. Refresh policy: see `RefreshPolicy` and deploy/README.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial

from opensearchpy import OpenSearch
from opensearchpy.exceptions import RequestError

from services.core.analysis import CjkMode, QueryPlan, TextAnalyzer
from services.core.deadline import Deadline
from services.core.errors import ConfigError, StoreUnavailable
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.storage.base import SCAN_BATCH, call_budget_s, search_budget_s, unrequested_deadline
from services.storage.lexical_fields import (
    FIELD_BOOSTS,
    IDENTIFIERS_FIELD,
    PlannedSearch,
    exact_first,
    index_format,
)
from services.storage.payload import (
    chunk_with_payload,
)
from services.storage.server.calls import ServerCallPolicy, ServerPart, batched
from services.storage.server.opensearch_bodies import (
    analyzed_source,
    index_template,
    lexical_query,
    scan_body,
    scope_filters,
    search_source,
    stored_chunk_from_source,
)
from services.storage.server.opensearch_client import (
    BulkAction,
    BulkWriter,
    WriteConflict,
    connect_opensearch,
    is_transient_opensearch_error,
)
from services.storage.settings import RefreshPolicy, StoreSettings

_CONFLICT_ATTEMPTS = 3


class OpenSearchLexicalStore(ServerPart[OpenSearch], PlannedSearch):
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
        analyzer: TextAnalyzer | None = None,
    ) -> None:
        self.client = client
        self.field_boosts = dict(field_boosts)
        self.analyzer = analyzer or TextAnalyzer()
        self._closed = False
        self.index = index
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self._calls = ServerCallPolicy("opensearch", is_transient_opensearch_error, write_attempts)
        self._bulk = BulkWriter(client, self._calls, index, refresh.value, timeout_s)
        self._calls.write(
            "ensure index", partial(self._ensure_index, shards, replicas), unrequested_deadline()
        )

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
            analyzer=TextAnalyzer(CjkMode(settings.lexical_cjk)),
        )

    # -- index lifecycle ------------------------------------------------------

    def _ensure_index(self, shards: int, replicas: int) -> None:
        # The template is (re)written on every start so mapping fixes ship with
        # the code; it only affects indices created afterwards.
        self._live().indices.put_index_template(
            name=f"{self.index}-template",
            body=index_template(self.index, shards, replicas, index_format(self.analyzer)),
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
                for field, kind in (
                    ("text_terms", "text"),
                    ("chunk_id", "keyword"),
                    ("meta", "keyword"),
                    (IDENTIFIERS_FIELD, "keyword"),
                )
                if properties.get(field, {}).get("type") != kind
            ]
            if wrong:
                raise ConfigError(
                    f"OpenSearch index {concrete!r} (OPENSEARCH_INDEX) was not created with this "
                    f"service's mapping (fields {wrong} differ); point OPENSEARCH_INDEX at a new "
                    "index and re-index (see deploy/README.md)"
                )
            built_with = body.get("mappings", {}).get("_meta", {}).get("analysis", "1")
            expected = index_format(self.analyzer)
            if built_with != expected:
                raise ConfigError(
                    f"OpenSearch index {concrete!r} (OPENSEARCH_INDEX) was built with lexical "
                    f"analysis {built_with}, but this version analyses text as "
                    f"{expected} (RAG_LEXICAL_CJK): point OPENSEARCH_INDEX at a new "
                    "index and re-index (docs/indexing.md, 'Re-indexing after an analysis change')"
                )

    # -- writes ---------------------------------------------------------------

    def upsert(self, chunks: Sequence[Chunk], deadline: Deadline) -> None:
        actions = [
            BulkAction("index", chunk.chunk_id, analyzed_source(chunk, self.analyzer))
            for chunk in chunks
        ]
        for batch in batched(actions, self.batch_size):
            self._bulk.write("upsert", batch, frozenset(), deadline)

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        """Rewrite the non-text fields of existing chunks; unknown ids are
        ignored, as in the embedded store. The whole document is re-indexed
        (its title and heading terms and its identifiers depend on the
        payload): read, then written back only if unchanged since. A conflict
        (another writer, or our own retried write that had landed) reads again."""
        for batch in batched(list(updates), self.batch_size):
            for attempt in range(1, _CONFLICT_ATTEMPTS + 1):
                try:
                    self._rewrite(batch, deadline)
                    break
                except WriteConflict:
                    if attempt == _CONFLICT_ATTEMPTS:
                        raise

    def _rewrite(self, batch: Sequence[tuple[str, ChunkPayload]], deadline: Deadline) -> None:
        current = self._get_versioned([chunk_id for chunk_id, _ in batch], deadline)
        actions = [
            BulkAction(
                "index",
                chunk_id,
                analyzed_source(chunk_with_payload(stored, payload), self.analyzer),
                if_version=version,
            )
            for chunk_id, payload in batch
            if chunk_id in current
            for stored, version in [current[chunk_id]]
        ]
        if actions:
            self._bulk.write("update payload", actions, frozenset(), deadline)

    def _get_versioned(
        self, chunk_ids: Sequence[str], deadline: Deadline
    ) -> dict[str, tuple[StoredChunk, tuple[int, int] | None]]:
        mget = partial(
            self._live().mget,
            index=self.index,
            body={"ids": list(dict.fromkeys(chunk_ids))},
            request_timeout=self._timeout(deadline, "a payload update"),
        )
        found = {}
        for doc in self._calls.read("get", mget)["docs"]:
            if doc.get("found"):
                version = (doc["_seq_no"], doc["_primary_term"]) if "_seq_no" in doc else None
                found[doc["_id"]] = (stored_chunk_from_source(doc["_source"]), version)
        return found

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        actions = [BulkAction("delete", chunk_id) for chunk_id in dict.fromkeys(chunk_ids)]
        for batch in batched(actions, self.batch_size):
            self._bulk.write("delete", batch, frozenset({404}), deadline)

    # -- reads ----------------------------------------------------------------

    def search_plan(
        self, plan: QueryPlan, limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        scoring = lexical_query(plan, self.field_boosts)
        if limit <= 0 or scoring is None:
            return []
        body = {
            "size": limit,
            "query": {"bool": {"must": [scoring], "filter": scope_filters(scope)}},
            "sort": [{"_score": "desc"}, {"chunk_id": "asc"}],
            "track_scores": True,
            "track_total_hits": False,
            "_source": search_source(plan),
        }
        timeout_s = search_budget_s(self.name, deadline, self.timeout_s)
        search = partial(
            self._live().search, index=self.index, body=body, request_timeout=timeout_s
        )
        hits = self._calls.read("search", search)["hits"]["hits"]
        scored = [
            ScoredChunk(stored_chunk_from_source(hit["_source"]), float(hit["_score"]))
            for hit in hits
        ]
        return exact_first(scored, plan)

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        found: list[StoredChunk] = []
        for batch in batched(list(dict.fromkeys(chunk_ids)), self.batch_size):
            mget = partial(
                self._live().mget,
                index=self.index,
                body={"ids": batch},
                request_timeout=search_budget_s(self.name, deadline, self.timeout_s),
            )
            docs = self._calls.read("get", mget)["docs"]
            found.extend(stored_chunk_from_source(d["_source"]) for d in docs if d.get("found"))
        return found

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        """Every stored chunk, `batch` at a time, in chunk-id order."""
        after: str | None = None
        while True:
            search = partial(
                self._live().search,
                index=self.index,
                body=scan_body(batch, after),
                request_timeout=self.timeout_s,
            )
            hits = self._calls.read("scan", search)["hits"]["hits"]
            if hits:
                yield [stored_chunk_from_source(hit["_source"]) for hit in hits]
            if len(hits) < batch:
                return
            after = str(hits[-1]["sort"][0])

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        body = {"query": {"bool": {"filter": scope_filters(scope)}}}
        timeout_s = self._timeout(deadline, "a count")
        count = partial(self._live().count, index=self.index, body=body, request_timeout=timeout_s)
        return int(self._calls.read("count", count)["count"])

    def _timeout(self, deadline: Deadline, what: str) -> float:
        """The request's timeout: the time left in `deadline`, at most the store's."""
        return call_budget_s(self.name, deadline, self.timeout_s, what)

    def ping(self) -> None:
        health = partial(
            self._live().cluster.health, index=self.index, request_timeout=self.timeout_s
        )
        status = self._calls.read("ping", health).get("status")
        if status not in ("green", "yellow"):
            # red: some primary shard of the index is unassigned, searches would be partial.
            raise StoreUnavailable(f"opensearch index {self.index!r} health is {status}")
