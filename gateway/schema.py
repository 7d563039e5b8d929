"""The JSON API's request and response shapes (stable, snake_case).

These models are both the validation of incoming JSON and the source of the
OpenAPI description; bounds that depend on settings (query length, top_k) are
checked by `SearchLimits` so their errors carry their own codes.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from gateway.errors import ApiError, ErrorCode
from gateway.reasons import ReasonCode
from services.core.query_text import EMPTY_QUERY, is_empty_query

ShortText = Annotated[StrictStr, Field(max_length=2048)]
# A BCP 47-style code, primary subtag lower-case ("en", "zh", "zh-Hant", "pt-BR").
# Used with fullmatch: a `$` anchor would let a trailing newline through.
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Scope(Strict):
    """Restricts the search; empty fields do not filter."""

    scope_id: ShortText = ""
    scope_ids: list[ShortText] = Field(
        default_factory=list, description="Several scopes at once (not together with scope_id)"
    )
    locale: Annotated[StrictStr, Field(max_length=35)] = ""
    doc_ids: list[ShortText] = Field(default_factory=list)
    urls: list[ShortText] = Field(default_factory=list)
    metadata: dict[Annotated[StrictStr, Field(max_length=128)], ShortText] = Field(
        default_factory=dict
    )


class Fusion(Strict):
    """How the channels' lists are combined (the Retriever's Fusion)."""

    method: Literal["rrf", "min_max", "dbsf"] | None = Field(
        None, description="None: the Retriever's default"
    )
    rrf_k: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)] = Field(
        0.0, description="RRF only; 0: the Retriever's default (60)"
    )


class RecencyBoost(Strict):
    """Decay on the page's updated_at (the Retriever's RecencyBoost; bounds checked there)."""

    weight: float = Field(description="In (0, 10]")
    scale_days: float = Field(description="Days past the offset at which the factor is `decay`")
    offset_days: float = 0.0
    decay: float = Field(0.5, description="In (0, 1)")
    function: Literal["exp", "gauss", "linear"] = "exp"
    origin: Annotated[StrictStr, Field(max_length=64)] = Field(
        "", description="RFC 3339; empty: now"
    )


class MetadataBoost(Strict):
    key: Annotated[StrictStr, Field(max_length=128)]
    value: ShortText
    weight: float = Field(description="In (0, 10]")


class Boosts(Strict):
    """Multiply each hit's fused score by 1 + the boosts it earns (docs/retrieval.md)."""

    recency: RecencyBoost | None = None
    metadata: list[MetadataBoost] = Field(default_factory=list, max_length=16)


class Diversity(Strict):
    """MMR over the final candidates (the Retriever's Diversity)."""

    mmr_lambda: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = Field(
        0.0, description="0: off; lower trades relevance for novelty"
    )
    window: Annotated[StrictInt, Field(ge=0, le=200)] = Field(0, description="0: 50")


class SearchRequest(Strict):
    query: StrictStr = Field(description="What to search for (bounded length)")
    page_url: ShortText = Field("", description="The page the user is on, if any")
    this_page: StrictBool = Field(False, description="Search only `page_url`'s own content")
    scope: Scope = Field(default_factory=Scope)
    top_k: StrictInt | None = Field(None, description="Hits wanted (default and maximum are set)")
    debug: StrictBool = Field(False, description="Include provenance and channel status")
    query_language: Annotated[StrictStr, Field(max_length=35)] = Field(
        "",
        description='The query\'s language ("en", "zh", "ja", "ko", ...); '
        "empty: the Retriever detects it from the script",
    )
    group_by_document: StrictBool = Field(
        False,
        description="Hits grouped by page: top_k counts pages, each with its best passages "
        "(the Retriever's per-document cap), pages ranked by their best passage",
    )
    fusion: Fusion = Field(default_factory=Fusion)
    boosts: Boosts = Field(default_factory=Boosts)
    diversity: Diversity = Field(default_factory=Diversity)
    page_token: Annotated[StrictStr, Field(max_length=2048)] = Field(
        "",
        description="The next_page_token of the previous answer to this same search: its next "
        "hits, never repeated or skipped (top_k may change; 409 page_expired once the index "
        "has changed)",
    )


class SearchLimits:
    """The configured bounds of one search request."""

    def __init__(self, max_query_chars: int, max_top_k: int, max_filter_values: int) -> None:
        self.max_query_chars = max_query_chars
        self.max_top_k = max_top_k
        self.max_filter_values = max_filter_values

    def check(self, request: SearchRequest) -> str:
        """Return the whitespace-normalized query, or raise a 4xx ApiError."""
        # Emptiness as the Retriever decides it (services.core.query_text),
        # so no empty query spends the budget or a downstream call.
        if is_empty_query(request.query):
            raise ApiError(ErrorCode.INVALID_REQUEST, EMPTY_QUERY)
        query = " ".join(request.query.split())
        if len(query) > self.max_query_chars:
            raise ApiError(
                ErrorCode.QUERY_TOO_LONG,
                f"query has {len(query)} characters; the limit is {self.max_query_chars}",
            )
        if request.top_k is not None and not 1 <= request.top_k <= self.max_top_k:
            raise ApiError(
                ErrorCode.TOP_K_OUT_OF_RANGE, f"top_k must be between 1 and {self.max_top_k}"
            )
        if request.query_language and not LANGUAGE_CODE.fullmatch(request.query_language):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                'query_language must be empty or a language code such as "en" or "zh-Hant"',
            )
        if request.this_page and not request.page_url.strip():
            raise ApiError(ErrorCode.INVALID_REQUEST, "this_page needs a page_url")
        scope = request.scope
        lists = (scope.scope_ids, scope.doc_ids, scope.urls, scope.metadata)
        if max(len(values) for values in lists) > self.max_filter_values:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"scope lists hold at most {self.max_filter_values} values",
            )
        return query


ChannelName = Literal["vector", "lexical", "unspecified"]


class ChannelMatch(BaseModel):
    channel: ChannelName
    rank: int = Field(description="1-based rank in that channel's list")
    score: float = Field(description="The channel's own score (cosine or BM25)")
    contribution: float = Field(0.0, description="What this channel added to fused_score")


class Span(BaseModel):
    """A match in a text: code-point offsets (Python str indices; in JavaScript
    index `Array.from(text)`, not the UTF-16 `text.slice`), end exclusive."""

    start: int
    end: int
    identifier: bool = Field(description="An exact identifier match (else a query term)")


class Translation(BaseModel):
    """The same page in another language."""

    locale: str = Field(description='Its language tag ("zh-CN", "en", ...)')
    url: str = Field(description="An absolute http(s) URL or a relative path")
    doc_id: str = Field(description="Its document id, in the hit's scope")


class Hit(BaseModel):
    rank: int
    citation: int | None = Field(description="The n of [n] in the evidence, if cited")
    chunk_id: str
    doc_id: str
    url: str
    title: str
    heading_path: str
    snippet: str = Field(
        description="Plain text: the start of the text cut at a word boundary, or, when "
        "the first match lies further on, a window around it led by an ellipsis"
    )
    snippet_highlights: list[Span] = Field(description="The matches, mapped onto `snippet`")
    text: str
    highlights: list[Span] = Field(
        description="Where the query's terms and identifiers matched in `text` "
        "(sorted, non-overlapping)"
    )
    exact_identifiers: list[str] = Field(
        description="The query's identifiers this hit contains exactly (lower-cased)"
    )
    position: int
    scope_id: str
    locale: str
    score: float
    fused_score: float
    reranked: bool
    rerank_score: float | None
    channels: list[ChannelMatch]
    translations: list[Translation] = Field(
        default_factory=list,
        description="The hit's page in other languages (empty when it has none), so a "
        "client can offer the reader's language; they never change the order of the hits",
    )
    group: int | None = Field(
        None,
        description="With group_by_document: the rank of the hit's page among the pages",
    )
    boost: float = Field(1.0, description="The multiplier the request's boosts put on fused_score")
    boost_reasons: list[str] = Field(default_factory=list, description="One line per boost")


class Citation(BaseModel):
    number: int
    chunk_id: str
    doc_id: str
    url: str
    title: str
    heading_path: str


class Evidence(BaseModel):
    text: str = Field(description="Numbered reference blocks, [n] as in `citations`")
    chars: int
    dropped_chunks: int
    truncated: bool


# The Retriever's own words name internal addresses, models and files; they
# reach only callers the deployment trusts (see gateway/reasons.py).
TRUSTED_ONLY = "Only with RAG_GATEWAY_DEBUG_REASONS and `debug`: "


class Rerank(BaseModel):
    used: bool
    fallback: bool
    code: ReasonCode = Field(description="What happened, as a stable code")
    message: str = Field(description="A fixed sentence for the code")
    reason: str | None = Field(None, description=TRUSTED_ONLY + "the Retriever's own reason")
    candidates: int
    reranked: int
    model: str | None = Field(None, description=TRUSTED_ONLY + "the reranker's model")
    latency_ms: float


class Degradation(BaseModel):
    component: Literal["vector", "lexical", "embedding", "reranker", "other"]
    code: ReasonCode = Field(description="What failed, as a stable code")
    message: str = Field(description="A fixed sentence for the code")
    reason: str | None = Field(None, description=TRUSTED_ONLY + "the Retriever's own reason")


class ChannelReport(BaseModel):
    channel: ChannelName
    status: Literal["ok", "error", "timeout", "skipped", "unspecified"]
    latency_ms: float
    hits: int
    error: str | None = Field(None, description=TRUSTED_ONLY + "the channel's error")


class DebugReport(BaseModel):
    channels: list[ChannelReport]
    normalized_query: str
    lexical_query: str
    notes: list[str]


class SearchResponse(BaseModel):
    request_id: str
    intent: Literal["site_search", "current_page", "unspecified"]
    page_status: Literal["indexed", "not_indexed", "unspecified"]
    query_language: str = Field(description="The language the Retriever used (given or detected)")
    message: str
    hits: list[Hit]
    evidence: Evidence
    citations: list[Citation]
    rerank: Rerank
    degraded: list[Degradation]
    timings_ms: dict[str, float]
    next_page_token: str = Field(
        "", description="Send it back as page_token for the next hits; empty on the last page"
    )
    debug: DebugReport | None = None
