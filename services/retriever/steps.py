"""The steps of Retrieve, built once from the configuration and the shared
parts (`build_retrieval_steps`, called by services.retriever.app), and
handed to the pipeline as one typed bundle (`RetrievalSteps`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from opentelemetry import trace

from services.core.analysis.query_translation import QueryTranslator
from services.embedding.embedder import Embedder
from services.retriever.boost_step import BoostStep
from services.retriever.candidates import CandidateFusion
from services.retriever.current_page import PageCheck
from services.retriever.diversity import DiversityStep
from services.retriever.evidence import EvidenceAssembler
from services.retriever.fan_out import ChannelFanOut
from services.retriever.fusion import RerankBlend
from services.retriever.hit_rows import HitRows
from services.retriever.language import EVERY_LANGUAGE, LanguageRule
from services.retriever.locale_balance import LocaleBalance
from services.retriever.locale_search import LocaleSearch
from services.retriever.metrics import RetrievalMetrics
from services.retriever.page_keys import PageTokenKeys
from services.retriever.prepare import CommittedScope, QueryPreparer
from services.retriever.requests import DEFAULT_CONFIG, RetrievalConfig
from services.retriever.rerank_client import RerankClient
from services.retriever.rerank_languages import ReadableFilter, parse_languages
from services.retriever.reranker_health import RerankerHealth
from services.retriever.reranker_limit import RerankerLimit
from services.retriever.reranking import RerankStep
from services.retriever.scope_locales import IndexLocales
from services.retriever.tail_reserve import TailReserve
from services.storage.storage import Storage
from services.storage.visibility import CommittedGeneration


@dataclass(frozen=True)
class LanguageCrossing:
    """What lets a Retrieve cross languages, each None where it is not there:
    the index's locales (to rank each apart, services.retriever.locale_balance;
    None: one vector list), the question's translator (its words for
    other-language locales; None: identifiers only there), and the model of the
    chunks' second vector (searched as its own channel where the index has one)."""

    locales: IndexLocales | None = None
    translator: QueryTranslator | None = None
    cross_lingual: Embedder | None = None


NO_CROSSING = LanguageCrossing()


@dataclass(frozen=True)
class RetrievalSteps:
    """Retrieve's steps, in the order they run, and what watches them."""

    config: RetrievalConfig
    prepare: QueryPreparer  # checks, normalizes, routes, analyses
    committed: CommittedScope  # the scope at the committed generation
    fan_out: ChannelFanOut  # the channels at once
    fusion: CandidateFusion  # their lists into one, capped
    boosts: BoostStep
    rerank: RerankStep
    diversity: DiversityStep
    rows: HitRows  # whole rows for partial hits
    evidence: EvidenceAssembler
    current_page: PageCheck
    page_keys: PageTokenKeys  # signs and verifies page tokens
    describe_lexical: Callable[[str], str]  # the lexical query, for the debug report
    reranker: RerankClient | None = None  # its channel closes with the pipeline
    reranker_health: RerankerHealth | None = None  # None: the Reranker is always called
    tracer: trace.Tracer | None = None  # None: stages are timed, not traced
    record_query_text: bool = False
    metrics: RetrievalMetrics | None = None  # None: answers are not counted


def build_retrieval_steps(
    embedder: Embedder,
    storage: Storage,
    reranker: RerankClient | None,
    executor: Executor,
    config: RetrievalConfig = DEFAULT_CONFIG,
    committed: CommittedGeneration | None = None,
    tracer: trace.Tracer | None = None,
    record_query_text: bool = False,
    reranker_health: RerankerHealth | None = None,
    metrics: RetrievalMetrics | None = None,
    crossing: LanguageCrossing = NO_CROSSING,
    page_keys: PageTokenKeys | None = None,
    channel_executor: Executor | None = None,
) -> RetrievalSteps:
    """`committed`: which rows may be served (None: every row; tests of the
    pipeline alone). `reranker_health`: skip the Reranker while it is
    NOT_SERVING. `crossing`: what ranks across languages (`LanguageCrossing`);
    `page_keys`: sign and verify page tokens (None: a random key).
    `channel_executor`: the threads of the channels' searches (None:
    `executor`); apart from the short reads of every request (commit point,
    locales, boosts, rows), which a flood of slow searches must not starve."""
    language_rule = LanguageRule(embedder.languages, config.unread_language_vector_weight)
    # One margin for the rest of the request, kept back by the channels and
    # the rerank call alike, learnt from what answered requests needed.
    reserve = TailReserve(floor_s=config.safety_margin_ms / 1000)
    searches = channel_executor or executor
    fan_out = _fan_out(
        embedder, storage, (searches, executor), config, language_rule, crossing, reserve
    )
    return RetrievalSteps(
        config,
        QueryPreparer(config, storage.analyzer, language_rule),
        CommittedScope(committed, executor, config.channel_timeout_ms / 1000),
        fan_out,
        CandidateFusion(config),
        BoostStep(
            storage.manifest,
            executor,
            config.exact_precedence,
            config.boost_read_timeout_ms / 1000,
        ),
        _rerank_step(config, reranker, reranker_health, reserve),
        DiversityStep(storage.vectors, executor, config.diversity_read_timeout_ms / 1000),
        HitRows(storage.vectors, storage.lexical, executor),
        EvidenceAssembler(config.context_char_budget),
        PageCheck(storage.lexical, executor, reserve),
        page_keys or PageTokenKeys.random(),
        storage.describe_query,
        reranker,
        reranker_health,
        tracer,
        record_query_text,
        metrics,
    )


def _fan_out(
    embedder: Embedder,
    storage: Storage,
    executors: tuple[Executor, Executor],
    config: RetrievalConfig,
    language_rule: LanguageRule,
    crossing: LanguageCrossing,
    reserve: TailReserve,
) -> ChannelFanOut:
    """`executors`: the searches' threads, then the short reads' (the locale read)."""
    searches, reads = executors
    balance = config.vector_locale_balance is LocaleBalance.INTERLEAVE
    multilingual = EVERY_LANGUAGE in language_rule.model_languages
    locale_search = LocaleSearch(
        storage.vectors,
        crossing.locales,
        balance and multilingual,
        crossing.translator,
        max_batched_searches=config.vector_search_batch,
    )
    cross_lingual = crossing.cross_lingual
    if cross_lingual is not None and not storage.vectors.second_dim:
        cross_lingual = None  # nothing to search it in
    return ChannelFanOut(
        embedder,
        storage.lexical,
        storage.analyzer,
        locale_search,
        searches,
        config,
        cross_lingual,
        storage.vectors,
        reserve,
        reads,
    )


def _rerank_step(
    config: RetrievalConfig,
    reranker: RerankClient | None,
    health: RerankerHealth | None,
    reserve: TailReserve,
) -> RerankStep:
    return RerankStep(
        reranker,
        config.rerank_candidates,
        config.rerank_budget_ms,
        config.safety_margin_ms,
        health,
        blend=RerankBlend(
            config.rerank_fused_weight,
            config.rerank_score_weight,
            config.rerank_blend_k,
            config.rerank_gate_margin,
        ),
        readable=ReadableFilter(parse_languages(config.rerank_languages)),
        reserve=reserve,
        limit=RerankerLimit(reranker.max_passages, config.rerank_candidates) if reranker else None,
    )
