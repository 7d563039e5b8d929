"""What a Retrieve asks for and what it answers, as plain values: the
pipeline's configuration, a request, a prepared query and the result."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.analysis import QueryPlan
from services.common.models import ScopeFilter
from services.retriever.channels import ChannelOutcome
from services.retriever.exact import ExactPrecedence
from services.retriever.language import LanguageDecision
from services.retriever.locale_balance import CrossLanguageLexical, LocaleBalance
from services.retriever.reranking import RerankOutcome
from services.retriever.types import Channel, Evidence, FusedHit, Intent


@dataclass(frozen=True)
class RetrievalConfig:
    default_top_k: int = 10
    max_top_k: int = 50
    candidates_per_channel: int = 50
    max_candidates_per_channel: int = 200
    rrf_k: int = 60
    max_chunks_per_document: int = 2
    context_char_budget: int = 6000
    rerank_candidates: int = 20
    rerank_budget_ms: int = 300
    channel_timeout_ms: int = 1000
    safety_margin_ms: int = 10
    max_query_chars: int = 1000
    exact_precedence: ExactPrecedence = ExactPrecedence.LEAD
    unread_language_vector_weight: float = 0.0
    vector_locale_balance: LocaleBalance = LocaleBalance.INTERLEAVE
    cross_language_lexical: CrossLanguageLexical = CrossLanguageLexical.DICTIONARY


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
    group_by_document: bool = False  # top_k counts documents (services.retriever.grouping)


@dataclass
class RetrievalResult:
    hits: list[FusedHit]
    intent: Intent
    normalized_query: str
    rerank: RerankOutcome
    evidence: Evidence
    channels: list[ChannelOutcome]
    page_indexed: bool | None = None  # None: no page scoping
    lexical_query: str = ""
    degraded: list[tuple[str, str]] = field(default_factory=list)
    message: str = ""
    timings: list[tuple[str, float]] = field(default_factory=list)
    query_language: str = ""
    notes: list[str] = field(default_factory=list)


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


DEFAULT_CONFIG = RetrievalConfig()
