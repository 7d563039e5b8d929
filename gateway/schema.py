"""The JSON API's request and response shapes (stable, snake_case).

These models are both the validation of incoming JSON and the source of the
OpenAPI description; bounds that depend on settings (query length, top_k) are
checked by `SearchLimits` so their errors carry their own codes.

Every request model is strict (`Strict`): a number is a JSON number (not
`"60"`, not `true`) and finite, a boolean a JSON boolean, a string a JSON
string. Text fields follow the services' shared rules
(services.core.field_rules, services.core.web_url), so the gateway refuses
what the Retriever would, before any budget or search is spent: language
tags are BCP 47, `origin` is RFC 3339, keys and values hold no control or
format characters, URLs carry no credentials and no mixed-script host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from gateway.errors import ApiError, ErrorCode
from gateway.reasons import ReasonCode
from services.core.field_rules import (
    MAX_BOOST_DAYS,
    MAX_BOOST_WEIGHT,
    MAX_LANGUAGE_TAG_CHARS,
    MAX_METADATA_VALUE_CHARS,
    MAX_SCOPE_ID_CHARS,
    hidden_character_problem,
    language_tag_problem,
    metadata_key_problem,
    parse_rfc3339,
    scope_id_problem,
)
from services.core.query_text import query_problem
from services.core.web_url import url_identity_problem


def _rule(problem_of: Callable[[str], str | None], empty_too: bool = False) -> AfterValidator:
    """A pydantic validator from a services rule (None: fine, else the problem);
    an empty value is left to the field's own rule unless `empty_too`."""

    def check(value: str) -> str:
        problem = problem_of(value) if value or empty_too else None
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def _rfc3339_problem(value: str) -> str | None:
    return (
        None
        if parse_rfc3339(value)
        else "not an RFC 3339 date-time with a zone offset (such as 2024-05-01T12:00:00Z)"
    )


FiniteFloat = Annotated[StrictFloat, Field(allow_inf_nan=False)]
ShortText = Annotated[StrictStr, Field(max_length=2048)]
# One-line text: no control or format characters (services.core.field_rules).
# A metadata key, as a document's must be (not blank, no `=`).
Key = Annotated[StrictStr, Field(max_length=128), _rule(metadata_key_problem, empty_too=True)]
OneLine = Annotated[ShortText, _rule(hidden_character_problem)]
# A metadata value (and what is compared with one) may break lines.
MetadataValue = Annotated[
    StrictStr,
    Field(max_length=MAX_METADATA_VALUE_CHARS),
    _rule(lambda v: hidden_character_problem(v, line_breaks=True)),
]
LanguageTag = Annotated[
    StrictStr, Field(max_length=MAX_LANGUAGE_TAG_CHARS), _rule(language_tag_problem)
]
Url = Annotated[ShortText, _rule(url_identity_problem)]
# A scope's name as a document's may be (the Retriever refuses any other).
ScopeId = Annotated[StrictStr, Field(max_length=MAX_SCOPE_ID_CHARS), _rule(scope_id_problem)]
ListedScopeId = Annotated[
    StrictStr, Field(min_length=1, max_length=MAX_SCOPE_ID_CHARS), _rule(scope_id_problem)
]


# What the Retriever accepts (checked here too, so the caller hears 422 at once).
BoostWeight = Annotated[FiniteFloat, Field(gt=0, le=MAX_BOOST_WEIGHT, description="In (0, 10]")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Scope(Strict):
    """Restricts the search; empty fields do not filter."""

    scope_id: ScopeId = ""
    scope_ids: list[ListedScopeId] = Field(
        default_factory=list, description="Several scopes at once (not together with scope_id)"
    )
    locale: LanguageTag = Field("", description="A BCP 47 language tag (en, zh-CN, ...)")
    doc_ids: list[ShortText] = Field(default_factory=list)
    urls: list[Url] = Field(default_factory=list)
    metadata: dict[Key, MetadataValue] = Field(default_factory=dict)


class Fusion(Strict):
    """How the channels' lists are combined (the Retriever's Fusion)."""

    method: Literal["rrf", "min_max", "dbsf"] | None = Field(
        None, description="None: the Retriever's default"
    )
    rrf_k: Annotated[FiniteFloat, Field(ge=0, le=1000)] = Field(
        0.0, description="RRF only; 0: the Retriever's default (60)"
    )


class RecencyBoost(Strict):
    """Decay on the page's updated_at (the Retriever's RecencyBoost, with its bounds)."""

    weight: BoostWeight
    scale_days: Annotated[FiniteFloat, Field(gt=0, le=MAX_BOOST_DAYS)] = Field(
        description="Days past the offset at which the factor is `decay`"
    )
    offset_days: Annotated[FiniteFloat, Field(ge=0, le=MAX_BOOST_DAYS)] = 0.0
    decay: Annotated[FiniteFloat, Field(gt=0, lt=1)] = Field(0.5, description="In (0, 1)")
    function: Literal["exp", "gauss", "linear"] = "exp"
    origin: Annotated[StrictStr, Field(max_length=64), _rule(_rfc3339_problem)] = Field(
        "", description="RFC 3339 date-time with a zone offset; empty: now"
    )


class MetadataBoost(Strict):
    key: Key
    value: MetadataValue
    weight: BoostWeight


class Boosts(Strict):
    """Multiply each hit's fused score by 1 + the boosts it earns (docs/retrieval.md)."""

    recency: RecencyBoost | None = None
    metadata: list[MetadataBoost] = Field(default_factory=list, max_length=16)


class Diversity(Strict):
    """MMR over the final candidates (the Retriever's Diversity)."""

    mmr_lambda: Annotated[FiniteFloat, Field(ge=0, le=1)] = Field(
        0.0, description="0: off; lower trades relevance for novelty"
    )
    window: Annotated[StrictInt, Field(ge=0, le=200)] = Field(0, description="0: 50")


class SearchRequest(Strict):
    query: StrictStr = Field(description="What to search for (bounded length)")
    page_url: Url = Field("", description="The page the user is on, if any")
    this_page: StrictBool = Field(False, description="Search only `page_url`'s own content")
    scope: Scope = Field(default_factory=Scope)
    top_k: StrictInt | None = Field(None, description="Hits wanted (default and maximum are set)")
    debug: StrictBool = Field(False, description="Include provenance and channel status")
    query_language: LanguageTag = Field(
        "",
        description='The query\'s language as a BCP 47 tag ("en", "zh", "ja", "ko", ...); '
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
        "hits, never repeated or skipped (top_k may change; 409 page_expired once a commit has "
        "changed its candidates)",
    )


class SearchLimits:
    """The configured bounds of one search request."""

    def __init__(self, max_query_chars: int, max_top_k: int, max_filter_values: int) -> None:
        self.max_query_chars = max_query_chars
        self.max_top_k = max_top_k
        self.max_filter_values = max_filter_values

    def check(self, request: SearchRequest) -> str:
        """Return the whitespace-normalized query, or raise a 4xx ApiError."""
        # Emptiness (and the letter, digit or symbol rule) as the Retriever
        # decides it (services.core.query_text), so no such query spends the
        # budget or a downstream call.
        problem = query_problem(request.query)
        if problem is not None:
            raise ApiError(ErrorCode.INVALID_REQUEST, problem)
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
        if request.this_page and not request.page_url.strip():
            raise ApiError(ErrorCode.INVALID_REQUEST, "this_page needs a page_url")
        self._check_scope(request.scope)
        _check_fusion(request.fusion)
        return query

    def _check_scope(self, scope: Scope) -> None:
        lists = (scope.scope_ids, scope.doc_ids, scope.urls, scope.metadata)
        if max(len(values) for values in lists) > self.max_filter_values:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"scope lists hold at most {self.max_filter_values} values",
            )
        if scope.scope_id and scope.scope_ids:
            raise ApiError(ErrorCode.INVALID_REQUEST, "scope: give scope_id or scope_ids, not both")


def _check_fusion(fusion: Fusion) -> None:
    """The Retriever's rule, where the request names the method (without one,
    the Retriever's default decides, and it says so)."""
    if fusion.rrf_k and fusion.method not in (None, "rrf"):
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"fusion.rrf_k: applies to rrf only, not {fusion.method}",
        )


ChannelName = Literal["vector", "lexical", "cross_lingual", "unspecified"]


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
