"""Qdrant Edge's side of a `ScopeFilter` and the payload indexes that serve it:
the filter every search carries (scope, locale, ids, urls, metadata terms,
the visibility generation) and which payload fields are indexed, and how."""

from __future__ import annotations

import qdrant_edge as qe

from services.core.models import ScopeFilter
from services.storage.payload import GENERATION_FIELD, METADATA_TERMS_FIELD, metadata_term

# Keyword indexes let filtered searches skip non-matching points instead of
# scanning payloads. Not chunk_id: no filter names it (a chunk is fetched by
# its point id), and its index, one distinct value per point, was ~23% of
# the vector store's heap growth while writing (payload_index_memory.md in
# bench/results/notes).
_MAPPED_KEYWORD_FIELDS = ("doc_id", "url", METADATA_TERMS_FIELD)
_SCOPE_FIELD = "scope_id"
_LOCALE_FIELD = "locale"


def edge_filter(scope: ScopeFilter | None) -> qe.Filter | None:
    """ScopeFilter as a Qdrant filter: every set field must match."""
    if scope is None or scope.is_empty():
        return None
    must: list[qe.FieldCondition] = []
    if scope.scope_id:
        must.append(qe.FieldCondition("scope_id", match=qe.MatchValue(scope.scope_id)))
    if scope.scope_ids:
        must.append(qe.FieldCondition("scope_id", match=qe.MatchAny(list(scope.scope_ids))))
    if scope.locale:
        must.append(qe.FieldCondition("locale", match=qe.MatchValue(scope.locale)))
    if scope.doc_ids:
        must.append(qe.FieldCondition("doc_id", match=qe.MatchAny(list(scope.doc_ids))))
    if scope.urls:
        must.append(qe.FieldCondition("url", match=qe.MatchAny(list(scope.urls))))
    for key, value in scope.metadata:
        term = metadata_term(key, value)
        must.append(qe.FieldCondition(METADATA_TERMS_FIELD, match=qe.MatchValue(term)))
    must_not: list[qe.FieldCondition] = []
    if scope.visible_generation is not None:
        # must_not(> G) rather than must(<= G): rows from before generations
        # existed have no such field and stay visible.
        later = qe.RangeFloat(gt=float(scope.visible_generation))
        must_not.append(qe.FieldCondition(GENERATION_FIELD, range=later))
    return qe.Filter(must=list(must), must_not=list(must_not))


def field_indexes() -> dict[str, qe.KeywordIndexParams | qe.IntegerIndexParams]:
    """Payload indexes, with filterable-HNSW sub-graphs for the scope only.

    The engine builds extra graph links for every indexed value holding more
    than `full_scan_threshold` worth of vectors, so a filter that selects a
    small part of a large index still walks a graph. Only a scope filter does
    that here: ids and urls select too few rows to need a graph (the engine
    scans them), the visibility filter (`generation`) keeps nearly every row,
    and locales are few and large. Leaving them out cut the HNSW build of a
    100k-chunk bench.scale index from 75 to 60 s with recall@10 unchanged
    (0.998 / 0.993, 1% scope 1.0 both).

    The keyword indexes but the locale's are `Memory.Cold`: an optimised
    segment maps their files instead of loading them into the heap, so they
    cost page cache the kernel can drop, not the process's own memory (a
    segment being written keeps its indexes in memory whatever this says).
    Shards created before keep the indexes they were created with.
    """
    cold = qe.Memory.Cold
    no_graph = qe.KeywordIndexParams(enable_hnsw=False, memory=cold)
    return {
        **{field: no_graph for field in _MAPPED_KEYWORD_FIELDS},
        _SCOPE_FIELD: qe.KeywordIndexParams(is_tenant=True, memory=cold),
        # Loaded: a request over a bilingual scope filters each search on a
        # locale, often one holding most of the points. Mapped, such a search
        # took ~12 ms against ~8.5 ms loaded at 1M chunks; loading it (with the
        # scope's, not separated) cost 54 MiB of heap there
        # (bench/results/notes/scale_sampled_memory.md).
        _LOCALE_FIELD: qe.KeywordIndexParams(enable_hnsw=False),
        # Loaded: every search filters on it, and mapped it slowed the
        # search p90 from 2.7 to 4.2-4.6 ms at 200,000 points.
        GENERATION_FIELD: qe.IntegerIndexParams(lookup=True, range=True, enable_hnsw=False),
    }
