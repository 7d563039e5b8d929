"""What every lexical store indexes and how it ranks, independent of the engine.

Each chunk is indexed as the shared analyzer's output (`services.core.analysis`):
one space-separated term string per text field (`title_terms`,
`heading_path_terms`, `text_terms`, which the engines split at spaces and
nothing else) and the list of exact identifier forms (`identifiers`, keyword
terms). The display text (`title`, `heading_path`, `text`) is stored, not
indexed.

Scoring, the same in tantivy and OpenSearch: the BM25 scores of every query
term and identifier phrase in every field, weighted per field and summed
(like Lucene's classic multi-field parser), plus a constant `EXACT_BOOST` for
each query identifier the chunk holds in its exact form. The boost only makes
sure exact matches are among the candidates; `exact_first` then orders the
candidates by BM25 (the boost removed, and reported without it) and moves the
best chunk holding the most of the query's identifiers to the top. So a
search for `text-embedding-v4` lists a chunk naming that model before chunks
that merely say "text" and "embedding", however often they say it, while a
long question that mentions a gene name (`APOE4`) is still ranked by all its
words: putting every holder before every other chunk cost SciFact train
lexical nDCG@10 0.006 (docs/retrieval.md, "Exact identifiers").

Field weights (default): title ×0.5, heading_path ×0.5, text ×1.0, fitted on
the train splits of the documentation sets (`bench.eval.default_boosts_fit`).
A title or heading is short and shared by every chunk of its page or section,
so a heavy weight lets one common question word in a title ("install",
"file") lift every chunk of that page: with title ×2.0 and heading ×1.5, the
lexical channel put the answer first for 0.20 of the third-party test
questions, with ×0.5 for 0.43. They are a corpus property (settings
`RAG_LEXICAL_*_BOOST`); SciFact's evaluation fits its own (`bench.eval.fit`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.deadline import Deadline
from services.core.errors import ConfigError
from services.core.exact_match import lead_holder, matched_identifiers
from services.core.models import ScopeFilter, ScoredChunk

FIELD_BOOSTS: dict[str, float] = {"title": 0.5, "heading_path": 0.5, "text": 1.0}
TERMS_SUFFIX = "_terms"
IDENTIFIERS_FIELD = "identifiers"
# Far above any BM25 sum of a real query, low enough that float32 scores keep
# the BM25 part exact to about 1e-4.
EXACT_BOOST = 1000.0


def terms_field(field: str) -> str:
    """`text` → `text_terms`: the indexed counterpart of a display field."""
    return field + TERMS_SUFFIX


def check_field_boosts(boosts: Mapping[str, float]) -> dict[str, float]:
    unknown = set(boosts) - set(FIELD_BOOSTS)
    if unknown or any(boost <= 0 for boost in boosts.values()):
        raise ConfigError(
            f"field boosts must be positive and name only {sorted(FIELD_BOOSTS)}: "
            f"got {dict(boosts)}"
        )
    return dict(boosts)


def exact_first(hits: Sequence[ScoredChunk], plan: QueryPlan) -> list[ScoredChunk]:
    """BM25 order (boost removed, ties by chunk_id), with the best chunk holding
    the most query identifiers moved to the top."""
    ranked = []
    for hit in hits:
        exact = matched_identifiers(hit.chunk, plan.identifiers)
        ranked.append(ScoredChunk(hit.chunk, hit.score - EXACT_BOOST * len(exact), exact))
    ranked.sort(key=lambda hit: (-hit.score, hit.chunk.chunk_id))
    return lead_holder(ranked)


def describe_plan(plan: QueryPlan, boosts: Mapping[str, float]) -> str:
    """The query as run, for debug output (never parsed back)."""
    if plan.is_empty():
        return "<empty>"
    words = [*plan.terms, *('"' + " ".join(w for _, w in p) + '"' for p in plan.phrases)]
    parts = [f"{field}^{boost:g}:({' '.join(words)})" for field, boost in boosts.items() if words]
    if plan.identifiers:
        parts.append(f"{IDENTIFIERS_FIELD}:({' '.join(plan.identifiers)})^exact")
    return " ".join(parts)


class PlannedSearch(ABC):
    """The raw-text side of a lexical store, the same in every engine: the
    query analysed by the store's `analyzer`, then searched (`search_plan`)
    or described with the store's `field_boosts`."""

    analyzer: TextAnalyzer
    field_boosts: Mapping[str, float]

    @abstractmethod
    def search_plan(
        self, plan: QueryPlan, limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]: ...

    def search(
        self, query: str, limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        return self.search_plan(self.analyzer.plan(query), limit, scope, deadline)

    def describe_query(self, query: str) -> str:
        """The query actually run for `query` (debug output)."""
        return describe_plan(self.analyzer.plan(query), self.field_boosts)


# Bump when the row layout changes (2: rows carry the run `generation` that
# wrote them). Recorded with the analysis version: an index with another
# layout is refused at start-up with the re-index path.
ROW_FORMAT = 2


def index_format(analyzer: TextAnalyzer) -> str:
    """What an index records about how it was built: analysis and row layout."""
    return f"{analyzer.version};rows={ROW_FORMAT}"
