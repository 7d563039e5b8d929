"""Retrieve: normalize → route → parallel channels → RRF → caps → rerank
under a deadline → evidence. Plain async Python; the servicer adapts protos."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor
from dataclasses import replace
from datetime import UTC, datetime

from opentelemetry import trace

from services.core.analysis.query_translation import QueryTranslator
from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, InvalidArgument
from services.core.logging import get_logger
from services.core.models import ScopeFilter
from services.embedding.embedder import Embedder
from services.retriever.boost_step import BoostStep
from services.retriever.channels import (
    ChannelOutcome,
    skipped_by_rule,
)
from services.retriever.current_page import check_page
from services.retriever.degradation import record_degradation
from services.retriever.diversity import DiversityStep
from services.retriever.evidence import EvidenceAssembler
from services.retriever.exact import (
    exact_precedence,
    precedence_note,
    with_exact_matches,
    with_highlights,
)
from services.retriever.fan_out import ChannelFanOut
from services.retriever.fusion import ListFuser, cap_per_document, drop_weak_vector_only
from services.retriever.grouping import MAX_GROUP_SIZE
from services.retriever.hit_rows import HitRows
from services.retriever.language import (  # check_language: re-exported for its importers
    EVERY_LANGUAGE,
    LanguageRule,
    check_language,
    language_weights,
)
from services.retriever.locale_balance import (
    IndexLocales,
    LocaleBalance,
    LocaleSearch,
    balance_note,
    fuse_per_locale,
)
from services.retriever.locale_order import LocaleOrderRule
from services.retriever.metrics import RetrievalMetrics
from services.retriever.page_keys import PageTokenKeys
from services.retriever.paging import (
    Page,
    PageCursor,
    next_page_token,
    page_of,
    reranked_positions,
)
from services.retriever.query import QueryNormalizer
from services.retriever.requests import (
    DEFAULT_CONFIG,
    PreparedQuery,
    RetrievalConfig,
    RetrievalRequest,
    RetrievalResult,
    check_limits,
)
from services.retriever.rerank_client import RerankClient
from services.retriever.rerank_languages import ReadableFilter, parse_languages
from services.retriever.reranker_health import RerankerHealth
from services.retriever.reranking import RerankCode, RerankOutcome, RerankStep, rerank_blend
from services.retriever.routing import IntentRouter
from services.retriever.run_state import RetrievalRun
from services.retriever.score_fusion import fuser_for
from services.retriever.stages import StageRecorder
from services.retriever.types import HYBRID, Channel, FusedHit, Intent
from services.storage.storage import Storage
from services.storage.visibility import CommittedGeneration

__all__ = [
    "PreparedQuery",
    "RetrievalConfig",
    "RetrievalPipeline",
    "RetrievalRequest",
    "RetrievalResult",
    "check_language",
]

log = get_logger(__name__)


class RetrievalPipeline:
    def __init__(
        self,
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
        locales: IndexLocales | None = None,
        translator: QueryTranslator | None = None,
        page_keys: PageTokenKeys | None = None,
        cross_lingual: Embedder | None = None,
    ) -> None:
        """`reranker_health`: skip the Reranker while it is NOT_SERVING (None:
        always call it). `metrics`: counts each answer (None: not counted).
        `locales`: the index's locales, for ranking across languages
        (services.retriever.locale_balance; None: one vector list);
        `translator`: the question's words for other-language locales (None:
        identifiers only there); `cross_lingual`: the model of the chunks'
        second vector, searched as its own channel where the index has one;
        `page_keys`: sign and verify page tokens (None: a random key of this
        pipeline)."""
        self.page_keys = page_keys or PageTokenKeys.random()
        self.metrics = metrics
        self.embedder, self.storage = embedder, storage
        self.vectors, self.lexical = storage.vectors, storage.lexical
        self.tracer = tracer  # None: stages are timed, not traced
        self.record_query_text = record_query_text
        # Which rows may be served (None: every row; tests of the pipeline alone).
        self.committed = committed
        # The lexical index's own analysis, so identifiers and highlights are
        # found exactly as the index found them.
        self.analyzer = storage.analyzer
        self.language_rule = LanguageRule(embedder.languages, config.unread_language_vector_weight)
        balance = config.vector_locale_balance is LocaleBalance.INTERLEAVE
        multilingual = EVERY_LANGUAGE in self.language_rule.model_languages
        self.locale_search = LocaleSearch(
            storage.vectors,
            locales,
            balance and multilingual,
            translator,
            max_batched_searches=config.vector_search_batch,
        )
        self.locale_order = LocaleOrderRule(config.locale_order, config.locale_order_margin)
        self.executor = executor
        self.config = config
        self.normalizer = QueryNormalizer(config.max_query_chars)
        self.router = IntentRouter()
        self.fuser = fuser_for(config.fusion, config.rrf_k)
        self.assembler = EvidenceAssembler(config.context_char_budget)
        self.reranker, self.reranker_health = reranker, reranker_health
        if cross_lingual is not None and not storage.vectors.second_dim:
            cross_lingual = None  # nothing to search it in
        self.fan_out = ChannelFanOut(
            embedder,
            storage.lexical,
            self.analyzer,
            self.locale_search,
            executor,
            config,
            cross_lingual,
            storage.vectors,
        )
        self.boost_step = BoostStep(
            storage.manifest,
            executor,
            config.exact_precedence,
            config.boost_read_timeout_ms / 1000,
        )
        self.diversity_step = DiversityStep(
            storage.vectors, executor, config.diversity_read_timeout_ms / 1000
        )
        self.hit_rows = HitRows(storage.vectors, storage.lexical, executor)
        self.rerank_step = RerankStep(
            reranker,
            config.rerank_candidates,
            config.rerank_budget_ms,
            config.safety_margin_ms,
            reranker_health,
            blend=rerank_blend(config),
            readable=ReadableFilter(parse_languages(config.rerank_languages)),
        )

    async def start(self) -> None:
        """Learn whether the Reranker serves before the first request (on the
        event loop that serves the requests)."""
        if self.reranker_health is not None:
            await self.reranker_health.start()

    async def close(self) -> None:
        """Stop watching the Reranker and release its channel."""
        if self.reranker_health is not None:
            await self.reranker_health.stop()
        if self.reranker is not None:
            await self.reranker.close()

    async def retrieve(self, request: RetrievalRequest, deadline: Deadline) -> RetrievalResult:
        stages = StageRecorder(self.tracer)
        started = time.perf_counter()
        prepared = self._prepare(request)
        stages.describe_request(
            prepared.text, prepared.intent.value, prepared.top_k, self.record_query_text
        )
        cursor = PageCursor.of(request, self.page_keys)
        prepared = replace(prepared, scope=await self._visible(prepared.scope, deadline))
        cursor.check_generation(prepared.scope.visible_generation)
        run = RetrievalRun(request, prepared, cursor, deadline, stages)
        await self._search_and_fuse(run)
        await self._order(run)
        result = await self._answer(run)
        record_degradation(result, run.vector, run.lexical, run.cross_lingual)
        if prepared.intent is Intent.CURRENT_PAGE:
            margin_s = self.config.safety_margin_ms / 1000
            scope = prepared.scope
            await check_page(result, self.lexical, self.executor, scope, deadline, margin_s)
        stages.record("total", _ms(started))
        stages.describe_answer(len(result.hits), len(result.degraded))
        if self.metrics is not None:  # once per answer, after every stage is timed
            self.metrics.record(result)
        return result

    async def _search_and_fuse(self, run: RetrievalRun) -> None:
        """Both channels, then fusion and boosts: `run.fused`, the candidates."""
        prepared, stages = run.prepared, run.stages
        outcomes = await self.fan_out.run(prepared, run.deadline, stages, run.balanced)
        vector, lexical, run.cross_lingual = outcomes
        if prepared.language.skip_vector and Channel.VECTOR in run.request.channels:
            vector = skipped_by_rule(Channel.VECTOR, prepared.language.note)
        stages.record("vector", vector.latency_ms)
        stages.record("lexical", lexical.latency_ms)
        if run.cross_lingual.requested:
            stages.record("cross_lingual", run.cross_lingual.latency_ms)
        run.vector, run.lexical = vector, lexical
        run.origin = run.request.boosts.recency_origin() or run.cursor.origin(datetime.now(UTC))
        with stages.stage("fusion") as span:
            fused = self._fuse(run, vector, lexical)
            if prepared.plan.identifiers:  # a vector-only hit's are read from its text
                fused = await self._whole_rows(run, fused)
            fused = self._place(run.request, prepared, fused, lexical)
            boosts = run.request.boosts
            run.fused, note = await self.boost_step.run(fused, boosts, run.origin, run.deadline)
            span.set_attribute("rag.candidates", len(run.fused))
        run.notes.append(note)

    async def _order(self, run: RetrievalRun) -> None:
        """Rerank (or restore a page token's order), precedence, diversity."""
        if run.cursor.token is None and run.request.rerank and self.reranker is not None:
            head = self.config.rerank_candidates  # the text the Reranker reads
            run.fused = await self._whole_rows(run, run.fused[:head]) + run.fused[head:]
        with run.stages.stage("rerank") as span:
            failed = [
                o.channel.value
                for o in (run.vector, run.lexical, run.cross_lingual)
                if o.requested and not o.ok
            ]
            hits, run.rerank = await self._rank(run, failed)
            _describe_rerank(span, run.rerank)
        cursor = run.cursor
        run.reranked = (
            cursor.token.reranked if cursor.token else reranked_positions(run.fused, hits)
        )
        hits = exact_precedence(hits, self.config.exact_precedence)
        diversity = run.request.diversity
        run.ordered, note = await self.diversity_step.run(hits, diversity, run.deadline)
        run.notes.append(note)

    async def _answer(self, run: RetrievalRun) -> RetrievalResult:
        """This page of the order, its evidence, and what explains it."""
        request, prepared = run.request, run.prepared
        page = self._page(run.ordered, request, prepared, run.cursor.offset)
        hits = await self._whole_rows(run, page.hits)
        hits = with_highlights(hits, self.analyzer, prepared.plan)
        with run.stages.stage("evidence"):
            budget = request.context_char_budget or self.config.context_char_budget
            evidence = self.assembler.assemble(hits, char_budget=budget)
        channels = [run.vector, run.lexical]
        if run.cross_lingual.requested:
            channels.append(run.cross_lingual)
        result = RetrievalResult(
            hits,
            prepared.intent,
            prepared.text,
            run.rerank,
            evidence,
            channels,
            timings=run.stages.timings,
        )
        self._explain(result, request, prepared, run.fused)
        result.hits_before = page.hits_before
        if page.next_offset is not None:
            keys, generation = self.page_keys, prepared.scope.visible_generation
            result.next_page_token = next_page_token(
                request, generation, run.fused, run.reranked, page.next_offset, run.origin, keys
            )
        result.notes.extend(note for note in run.notes if note)
        if run.balanced.vector and run.vector.ok:
            translated = bool(run.balanced.translated)
            order = run.balanced.order
            result.notes.append(balance_note(list(run.balanced.vector), translated, order))
            if request.debug:
                result.notes.extend(run.balanced.translation_notes())
        if request.debug and run.vector.ok:
            result.notes.append(run.balanced.embedding_note())
        return result

    async def _whole_rows(self, run: RetrievalRun, hits: list[FusedHit]) -> list[FusedHit]:
        """`hits` with whole rows (services.retriever.hit_rows), from a store
        whose channel answered."""
        if not any(hit.chunk.partial for hit in hits):
            return hits
        answered = [o.channel for o in (run.vector, run.lexical) if o.ok]
        visible = run.prepared.scope.visible_generation
        with run.stages.stage("rows"):
            return await self.hit_rows.complete(hits, run.deadline, visible, answered)

    async def _visible(self, scope: ScopeFilter, deadline: Deadline) -> ScopeFilter:
        """The scope limited to committed rows (services.storage.visibility);
        a re-read of the commit point is bounded by the request's deadline."""
        if self.committed is None:
            return scope
        generation = self.committed.cached()
        if generation is None:
            loop = asyncio.get_running_loop()
            read = loop.run_in_executor(self.executor, self.committed.current, deadline)
            try:
                generation = await asyncio.wait_for(read, deadline.timeout_or_none())
            except TimeoutError as exc:
                # As a failed re-read: the last value read only hides newer rows.
                generation = self.committed.last()
                if generation is None:
                    raise DeadlineExceeded("reading the commit point ran out of time") from exc
        return replace(scope, visible_generation=generation)

    def _prepare(self, request: RetrievalRequest) -> PreparedQuery:
        query = self.normalizer.normalize(request.query)
        top_k, depth = check_limits(request, self.config)
        intent = request.intent or self.router.route(query, request.page_url)
        if intent is Intent.CURRENT_PAGE and not request.page_url.strip():
            raise InvalidArgument("intent: current_page needs page_url")
        scope = request.scope
        if intent is Intent.CURRENT_PAGE:
            scope = replace(scope, urls=(request.page_url,), doc_ids=())
        plan = self.analyzer.plan(query)
        language = self.language_rule.decide(
            query,
            check_language(request.query_language),
            scope.locale,
            vector_requested=Channel.VECTOR in request.channels,
            hybrid=request.channels >= HYBRID,
        )
        channels = request.channels
        if language.skip_vector:
            channels = channels - {Channel.VECTOR}
        return PreparedQuery(query, plan, intent, scope, top_k, depth, language, channels)

    def _explain(
        self,
        result: RetrievalResult,
        request: RetrievalRequest,
        prepared: PreparedQuery,
        fused: list[FusedHit],
    ) -> None:
        result.query_language = prepared.language.language
        if prepared.language.note:
            result.notes.append(prepared.language.note)
        rule = self.config.exact_precedence
        if note := precedence_note(fused, prepared.plan.identifiers, rule):
            result.notes.append(note)
        if request.debug:
            result.lexical_query = self._describe_lexical(prepared.text)

    def _page(
        self, hits: list[FusedHit], request: RetrievalRequest, prepared: PreparedQuery, offset: int
    ) -> Page:
        """top_k hits, or top_k documents' groups (services.retriever.grouping),
        from `offset` on, and where the next page starts."""
        size = 0
        if request.group_by_document:
            size = request.max_chunks_per_document or self.config.max_chunks_per_document
        return page_of(hits, offset, prepared.top_k, min(size, MAX_GROUP_SIZE))

    async def _rank(
        self, run: RetrievalRun, failed: list[str]
    ) -> tuple[list[FusedHit], RerankOutcome]:
        """Rerank the first page; a later page restores the first page's order
        (services.retriever.paging) rather than asking the Reranker again."""
        cursor, fused = run.cursor, run.fused
        if cursor.token is None:
            rerank = run.request.rerank
            return await self.rerank_step.run(run.prepared.text, fused, rerank, run.deadline)
        hits = cursor.restore(fused, failed)
        code = RerankCode.RERANKED if cursor.token.reranked else RerankCode.OFF
        reason = "the first page's order, carried by page_token"
        return hits, RerankOutcome(code, used=bool(cursor.token.reranked), reason=reason)

    def _fuse(
        self, run: RetrievalRun, vector: ChannelOutcome, lexical: ChannelOutcome
    ) -> list[FusedHit]:
        request, prepared, balanced = run.request, run.prepared, run.balanced
        weights = dict(language_weights(request.weights, prepared.language) or {})
        weights.setdefault(Channel.CROSS_LINGUAL, self.config.cross_lingual_weight)
        fuser = self._fuser(request)
        cross = run.cross_lingual.hits if run.cross_lingual.ok else []
        if balanced.vector and vector.ok:
            lexical_hits = lexical.hits if lexical.ok else []
            translated = balanced.translated if lexical.ok else {}
            language = prepared.language.language
            fused = fuse_per_locale(
                fuser,
                balanced.vector,
                lexical_hits,
                language,
                weights,
                translated,
                rule=self.locale_order,
                decided=balanced,
                cross_lingual=cross,
            )
        else:
            outcomes = (vector, lexical, run.cross_lingual)
            ranked = {outcome.channel: outcome.hits for outcome in outcomes if outcome.ok}
            fused = fuser.fuse(ranked, weights)
        return fused

    def _place(
        self,
        request: RetrievalRequest,
        prepared: PreparedQuery,
        fused: list[FusedHit],
        lexical: ChannelOutcome,
    ) -> list[FusedHit]:
        """Exact-identifier precedence, the weak vector-only cut and the
        per-document cap over the fused list."""
        held = {hit.chunk.chunk_id: hit.exact for hit in lexical.hits} if lexical.ok else {}
        fused = with_exact_matches(fused, prepared.plan.identifiers, held)
        fused = exact_precedence(fused, self.config.exact_precedence)
        fused = drop_weak_vector_only(fused, request.min_vector_score)
        per_doc = request.max_chunks_per_document or self.config.max_chunks_per_document
        return cap_per_document(fused, per_doc)

    def _fuser(self, request: RetrievalRequest) -> ListFuser:
        """The configured fuser, or the one the request asks for."""
        if request.fusion is None and not request.rrf_k:
            return self.fuser
        method = request.fusion or self.config.fusion
        return fuser_for(method, request.rrf_k or self.config.rrf_k)

    def _describe_lexical(self, query: str) -> str:
        return self.storage.describe_query(query)


def _describe_rerank(span: trace.Span, rerank: RerankOutcome) -> None:
    span.set_attribute("rag.rerank.candidates", rerank.candidates)
    span.set_attribute("rag.rerank.reranked", rerank.reranked)
    span.set_attribute("rag.rerank.fallback", rerank.fallback)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000
