"""What a Retrieve asks for and what it answers, as plain values: the
pipeline's configuration, a request, a prepared query and the result."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from services.core.analysis import QueryPlan
from services.core.analysis.query_shape import QueryShape
from services.core.errors import InvalidArgument
from services.core.models import ScopeFilter
from services.retriever.boosts import Boosts, check_boosts
from services.retriever.channels import ChannelOutcome
from services.retriever.degradation import Degraded
from services.retriever.diversity import Diversity, check_diversity
from services.retriever.exact import ExactPrecedence
from services.retriever.fusion import FITTED_RERANK_BLEND
from services.retriever.language import LanguageDecision
from services.retriever.locale_balance import CrossLanguageLexical, LocaleBalance
from services.retriever.locale_order import (
    DEFAULT_CROSS_LINGUAL_MARGIN,
    DEFAULT_MARGIN,
    DEFAULT_WAIT_GAP,
    LocaleOrder,
    LocaleOrderRule,
    QueryOrderRules,
)
from services.retriever.pages import MAX_GROUP_SIZE
from services.retriever.reranking import RerankOutcome
from services.retriever.score_fusion import FusionMethod
from services.retriever.translation_deferral import THRESHOLD as DEFERRAL_THRESHOLD
from services.retriever.types import Channel, Evidence, FusedHit, Intent


@dataclass(frozen=True)
class RetrievalConfig:
    default_top_k: int = 10
    max_top_k: int = 50
    candidates_per_channel: int = 50
    max_candidates_per_channel: int = 200
    rrf_k: int = 60
    fusion: FusionMethod = FusionMethod.RRF
    max_chunks_per_document: int = 2
    context_char_budget: int = 6000
    rerank_candidates: int = 4
    rerank_budget_ms: int = 400
    rerank_languages: str = "en"
    rerank_fused_weight: float = FITTED_RERANK_BLEND.fused_weight
    rerank_score_weight: float = FITTED_RERANK_BLEND.rerank_weight
    rerank_blend_k: float = FITTED_RERANK_BLEND.k
    rerank_gate_margin: float = FITTED_RERANK_BLEND.gate
    channel_timeout_ms: int = 1000
    boost_read_timeout_ms: int = 500
    diversity_read_timeout_ms: int = 500
    safety_margin_ms: int = 50
    max_query_chars: int = 1000
    exact_precedence: ExactPrecedence = ExactPrecedence.LEAD
    unread_language_vector_weight: float = 0.0
    vector_locale_balance: LocaleBalance = LocaleBalance.INTERLEAVE
    cross_language_lexical: CrossLanguageLexical = CrossLanguageLexical.DICTIONARY
    vector_search_batch: int = 1
    # Channel weights when a request does not set one.
    vector_weight: float = 1.0  # a query that does not read as a question
    lexical_weight: float = 1.0
    question_vector_weight: float = 3.0  # for a query that reads as a question
    question_min_words: int = 4
    cross_lingual_weight: float = 1.0
    locale_order: LocaleOrder = LocaleOrder.EVIDENCE
    locale_order_margin: float = DEFAULT_MARGIN
    locale_order_cross_lingual_margin: float = DEFAULT_CROSS_LINGUAL_MARGIN
    locale_wait_gap: float = DEFAULT_WAIT_GAP
    translation_deferral_share: float = DEFERRAL_THRESHOLD

    def order_rules(self) -> QueryOrderRules:
        """Which locale leads the turns (services.retriever.locale_order), by query shape."""
        rule = LocaleOrderRule(
            self.locale_order,
            self.locale_order_margin,
            self.locale_order_cross_lingual_margin,
            self.locale_wait_gap,
        )
        return QueryOrderRules(rule, self.question_min_words)


@dataclass(frozen=True)
class RetrievalRequest:
    query: str
    top_k: int = 0
    scope: ScopeFilter = field(default_factory=ScopeFilter)
    page_url: str = ""
    debug: bool = False
    rerank: bool = True
    weights: dict[Channel, float] | None = None
    max_chunks_per_document: int = 0
    context_char_budget: int = 0
    min_vector_score: float = 0.0
    candidates_per_channel: int = 0
    channels: frozenset[Channel] = frozenset(Channel)
    intent: Intent | None = None  # None: route by rules
    query_language: str = ""  # "": detect from the script
    group_by_document: bool = False  # top_k counts documents (services.retriever.pages)
    page_token: str = ""  # "": the first page (services.retriever.paging)
    fusion: FusionMethod | None = None  # None: the configured default
    rrf_k: float = 0.0  # RRF only; 0: the configured k
    boosts: Boosts = field(default_factory=Boosts)  # services.retriever.boosts
    diversity: Diversity = field(default_factory=Diversity)  # services.retriever.diversity


@dataclass(frozen=True)
class RetrievalResult:
    """One Retrieve's answer, built once when every step has run."""

    hits: list[FusedHit]
    intent: Intent
    normalized_query: str
    rerank: RerankOutcome
    evidence: Evidence
    channels: list[ChannelOutcome]
    page_indexed: bool | None = None  # None: no page scoping
    lexical_query: str = ""
    degraded: list[Degraded] = field(default_factory=list)
    message: str = ""
    timings: list[tuple[str, float]] = field(default_factory=list)
    query_language: str = ""
    notes: list[str] = field(default_factory=list)
    next_page_token: str = ""  # "": no further page
    hits_before: int = 0  # hits on earlier pages: this page's ranks follow on


NO_SHAPE = QueryShape(0, 0)


@dataclass(frozen=True)
class PreparedQuery:
    """A request after validation, routing and analysis: what the channels run."""

    text: str
    plan: QueryPlan
    intent: Intent
    scope: ScopeFilter
    top_k: int
    depth: int
    language: LanguageDecision
    channels: frozenset[Channel]
    shape: QueryShape = NO_SHAPE  # words and function words: the question weight

    @property
    def cache_partition(self) -> str:
        """The query-vector cache this request may reuse: its scopes' own
        (services.embedding.embedder.cache_key); "" for every scope."""
        return "\x1f".join((self.scope.scope_id, *sorted(self.scope.scope_ids)))


DEFAULT_CONFIG = RetrievalConfig()
MAX_RRF_K = 1000.0


def check_limits(request: RetrievalRequest, cfg: RetrievalConfig) -> tuple[int, int]:
    """top_k and the per-channel depth; InvalidArgument naming the field and
    the limit for a value out of bounds."""
    top_k = request.top_k or cfg.default_top_k
    if not 1 <= top_k <= cfg.max_top_k:
        raise InvalidArgument(f"top_k: {request.top_k} is outside 1..{cfg.max_top_k}")
    depth = request.candidates_per_channel or cfg.candidates_per_channel
    if not 1 <= depth <= cfg.max_candidates_per_channel:
        raise InvalidArgument(
            f"candidates_per_channel: {depth} is outside 1..{cfg.max_candidates_per_channel}"
        )
    if not 0.0 <= request.min_vector_score <= 1.0:
        raise InvalidArgument(f"min_vector_score: {request.min_vector_score} is outside 0..1")
    if request.max_chunks_per_document < 0:
        raise InvalidArgument("max_chunks_per_document: must not be negative")
    if request.group_by_document and request.max_chunks_per_document > MAX_GROUP_SIZE:
        raise InvalidArgument(
            f"max_chunks_per_document: {request.max_chunks_per_document} is outside "
            f"0..{MAX_GROUP_SIZE} with group_by_document"
        )
    _check_fusion(request, cfg)
    check_boosts(request.boosts)
    check_diversity(request.diversity)
    return top_k, max(depth, top_k)


def _check_fusion(request: RetrievalRequest, cfg: RetrievalConfig) -> None:
    if not (math.isfinite(request.rrf_k) and 0.0 <= request.rrf_k <= MAX_RRF_K):
        raise InvalidArgument(f"fusion.rrf_k: {request.rrf_k} is outside 0..{MAX_RRF_K:g}")
    method = request.fusion or cfg.fusion
    if request.rrf_k and method is not FusionMethod.RRF:
        raise InvalidArgument(f"fusion.rrf_k: applies to rrf only, not {method.value}")
