"""The bodies the OpenSearch lexical store sends: the index template, the
scoring query, filters and documents (see `opensearch_store` for why the
index only splits the service's terms at spaces)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.models import Chunk, ScopeFilter, StoredChunk
from services.storage.lexical_fields import (
    EXACT_BOOST,
    FIELD_BOOSTS,
    IDENTIFIERS_FIELD,
    TERMS_SUFFIX,
    terms_field,
)
from services.storage.payload import (
    GENERATION_FIELD,
    METADATA_TERMS_FIELD,
    SEARCH_FIELDS,
    chunk_payload,
    metadata_from_terms,
    metadata_term,
    stored_chunk_from_payload,
)

ANALYZER = "rag_terms"
SIMILARITY = "rag_bm25"
KEYWORD_FIELDS = ("chunk_id", "doc_id", "url", "scope_id", "locale", METADATA_TERMS_FIELD)


def index_template(index: str, shards: int, replicas: int, analysis_version: str) -> dict[str, Any]:
    terms = {"type": "text", "analyzer": ANALYZER, "similarity": SIMILARITY}
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
                # The service analyzes; the index only splits at spaces.
                "analysis": {"analyzer": {ANALYZER: {"type": "custom", "tokenizer": "whitespace"}}},
            },
            "mappings": {
                "_meta": {"analysis": analysis_version},
                # strict: a field outside this layout is a bug, not a new column.
                "dynamic": "strict",
                "properties": {
                    **{field: {"type": "keyword"} for field in KEYWORD_FIELDS},
                    IDENTIFIERS_FIELD: {"type": "keyword"},
                    "content_hash": {"type": "keyword", "index": False},
                    "position": {"type": "integer"},
                    GENERATION_FIELD: {"type": "long"},
                    **{field: {"type": "text", "index": False} for field in FIELD_BOOSTS},
                    **{terms_field(field): dict(terms) for field in FIELD_BOOSTS},
                },
            },
        },
    }


def lexical_query(
    plan: QueryPlan, boosts: Mapping[str, float] = FIELD_BOOSTS
) -> dict[str, Any] | None:
    """The scoring part of a search: None when the plan is empty.

    Every clause is a `should`, so per-field, per-phrase and per-identifier
    scores add up as in tantivy_query (`most_fields` sums the per-field matches)."""
    if plan.is_empty():
        return None
    fields = [f"{terms_field(field)}^{boost:g}" for field, boost in boosts.items()]
    should: list[dict[str, Any]] = []
    if plan.terms:
        should.append(
            {
                "multi_match": {
                    "query": " ".join(plan.terms),
                    "type": "most_fields",
                    "fields": fields,
                }
            }
        )
    should.extend(
        {"match_phrase": {terms_field(field): {"query": _phrase(phrase), "boost": boost}}}
        for phrase in plan.phrases
        for field, boost in boosts.items()
    )
    should.extend(
        {"constant_score": {"filter": {"term": {IDENTIFIERS_FIELD: ident}}, "boost": EXACT_BOOST}}
        for ident in plan.identifiers
    )
    return {"bool": {"should": should, "minimum_should_match": 1}}


def _phrase(phrase: Sequence[tuple[int, str]]) -> str:
    return " ".join(word for _, word in phrase)


def scope_filters(scope: ScopeFilter | None) -> list[dict[str, Any]]:
    """ScopeFilter as filter-context clauses that must all match."""
    if scope is None or scope.is_empty():
        return []
    clauses: list[dict[str, Any]] = []
    if scope.scope_id:
        clauses.append({"term": {"scope_id": scope.scope_id}})
    if scope.scope_ids:
        clauses.append({"terms": {"scope_id": list(scope.scope_ids)}})
    if scope.locale:
        clauses.append({"term": {"locale": scope.locale}})
    if scope.doc_ids:
        clauses.append({"terms": {"doc_id": list(scope.doc_ids)}})
    if scope.urls:
        clauses.append({"terms": {"url": list(scope.urls)}})
    for key, value in scope.metadata:
        clauses.append({"term": {METADATA_TERMS_FIELD: metadata_term(key, value)}})
    if scope.visible_generation is not None:
        # must_not(> G): rows from before generations existed stay visible.
        later = {"range": {GENERATION_FIELD: {"gt": scope.visible_generation}}}
        clauses.append({"bool": {"must_not": [later]}})
    return clauses


def scan_body(batch: int, after: str | None) -> dict[str, Any]:
    """One page of every row in chunk-id order (search_after, no scroll context
    to keep alive or leak)."""
    body: dict[str, Any] = {
        "size": batch,
        "query": {"match_all": {}},
        "sort": [{"chunk_id": "asc"}],
        "track_total_hits": False,
        "_source": WHOLE_ROW_SOURCE,
    }
    if after is not None:
        body["search_after"] = [after]
    return body


# The term strings double a hit's size and are never shown.
WHOLE_ROW_SOURCE = {"excludes": [f"*{TERMS_SUFFIX}", IDENTIFIERS_FIELD]}


def search_source(plan: QueryPlan) -> dict[str, Any]:
    """What a search reads of each hit's `_source`: the first phase's fields
    (payload.SEARCH_FIELDS, metadata as its `meta` terms), or whole rows when
    the query has identifiers (a hit's `exact` is read from its text)."""
    if plan.identifiers:
        return WHOLE_ROW_SOURCE
    fields = [name for name in SEARCH_FIELDS if name != "metadata"]
    return {"includes": [*fields, METADATA_TERMS_FIELD]}


def lexical_source(fields: dict[str, Any]) -> dict[str, Any]:
    """Vector payload fields minus the metadata object: the index keeps only
    the `meta` terms (a partial update replaces a list but would merge an
    object, leaving removed keys behind)."""
    return {key: value for key, value in fields.items() if key != "metadata"}


def analyzed_source(chunk: Chunk, analyzer: TextAnalyzer) -> dict[str, Any]:
    """A chunk's whole document: payload fields, term strings, identifiers."""
    analyzed = analyzer.analyze_chunk(chunk.title, chunk.heading_path, chunk.text)
    source = lexical_source(chunk_payload(chunk))
    source.update({terms_field(field): getattr(analyzed, field) for field in FIELD_BOOSTS})
    source[IDENTIFIERS_FIELD] = analyzed.identifiers.split()
    return source


def stored_chunk_from_source(source: dict[str, Any]) -> StoredChunk:
    """A document's `_source` as a chunk: the vector payload's layout, with the
    metadata kept as `meta` terms (see `lexical_source`)."""
    metadata = metadata_from_terms(source.get(METADATA_TERMS_FIELD) or [])
    return stored_chunk_from_payload({**source, "metadata": metadata})
