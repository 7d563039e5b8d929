"""Retrieve: normalize → route → parallel channels → RRF → caps → rerank
under a deadline → evidence. Plain async Python; the servicer adapts protos.

The pipeline receives its steps built (services.retriever.steps); each step
takes what it needs and returns what it made (services.retriever.run_state),
and the answer is built once, when every step has run."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime

from opentelemetry import trace

from services.core.deadline import Deadline
from services.core.logging import get_logger
from services.retriever.candidates import question_weight_note
from services.retriever.channels import ChannelOutcome, skipped_by_rule
from services.retriever.current_page import NOT_INDEXED
from services.retriever.degradation import degradation
from services.retriever.exact import exact_precedence, precedence_note, with_highlights
from services.retriever.fan_out import FanOut
from services.retriever.grouping import MAX_GROUP_SIZE
from services.retriever.language import check_language  # re-exported for its importers
from services.retriever.locale_balance import balance_note
from services.retriever.paging import Page, PageCursor, page_of, reranked_positions
from services.retriever.requests import (
    PreparedQuery,
    RetrievalConfig,
    RetrievalRequest,
    RetrievalResult,
)
from services.retriever.reranking import RerankCode, RerankOutcome
from services.retriever.run_state import Candidates, Ordering, RetrievalRun
from services.retriever.stages import StageRecorder
from services.retriever.steps import RetrievalSteps
from services.retriever.types import Channel, FusedHit, Intent

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
    def __init__(self, steps: RetrievalSteps) -> None:
        """`steps`: built by services.retriever.steps.build_retrieval_steps."""
        self.steps = steps
        self.config = steps.config

    async def start(self) -> None:
        """Learn whether the Reranker serves before the first request (on the
        event loop that serves the requests)."""
        if self.steps.reranker_health is not None:
            await self.steps.reranker_health.start()

    async def close(self) -> None:
        """Stop watching the Reranker and release its channel."""
        if self.steps.reranker_health is not None:
            await self.steps.reranker_health.stop()
        if self.steps.reranker is not None:
            await self.steps.reranker.close()

    async def retrieve(self, request: RetrievalRequest, deadline: Deadline) -> RetrievalResult:
        stages = StageRecorder(self.steps.tracer)
        started = time.perf_counter()
        run = await self._begin(request, deadline, stages)
        searched = await self._search(run)
        candidates = await self._candidates(run, searched)
        ordering = await self._order(run, searched, candidates)
        answer = await self._answer(run, searched, candidates, ordering)
        self.steps.rerank.observe_tail(ordering.rerank)
        stages.record("total", _ms(started))
        result = replace(answer, timings=list(stages.timings))
        stages.describe_answer(len(result.hits), len(result.degraded))
        if self.steps.metrics is not None:  # once per answer, after every stage is timed
            self.steps.metrics.record(result)
        return result

    async def _begin(
        self, request: RetrievalRequest, deadline: Deadline, stages: StageRecorder
    ) -> RetrievalRun:
        """The request checked and prepared, its page token read, its scope
        at the committed generation."""
        prepared = self.steps.prepare.prepare(request)
        record_text = self.steps.record_query_text
        stages.describe_request(prepared.text, prepared.intent.value, prepared.top_k, record_text)
        cursor = PageCursor.of(request, self.steps.page_keys)
        scope = await self.steps.committed.visible(prepared.scope, deadline)
        prepared = replace(prepared, scope=scope)
        cursor.check_generation(scope.visible_generation)
        return RetrievalRun(request, prepared, cursor, deadline, stages)

    async def _search(self, run: RetrievalRun) -> FanOut:
        """Every channel at once, each timed."""
        prepared, stages = run.prepared, run.stages
        searched = await self.steps.fan_out.run(prepared, run.deadline, stages)
        if prepared.language.skip_vector and Channel.VECTOR in run.request.channels:
            skipped = skipped_by_rule(Channel.VECTOR, prepared.language.note)
            searched = replace(searched, vector=skipped)
        for outcome in _reported(searched):  # vector and lexical timed even when not asked
            stages.record(outcome.channel.value, outcome.latency_ms)
        return searched

    async def _candidates(self, run: RetrievalRun, searched: FanOut) -> Candidates:
        """Fusion, the caps and the boosts: the candidates."""
        request, prepared = run.request, run.prepared
        origin = request.boosts.recency_origin() or run.cursor.origin(datetime.now(UTC))
        with run.stages.stage("fusion") as span:
            fused, locales = self.steps.fusion.fuse(request, prepared, searched)
            if prepared.plan.identifiers:  # a vector-only hit's are read from its text
                fused = await self._whole_rows(run, searched, fused)
            fused = self.steps.fusion.place(request, prepared, fused, searched.lexical)
            boosted, note = await self.steps.boosts.run(fused, request.boosts, origin, run.deadline)
            span.set_attribute("rag.candidates", len(boosted))
        return Candidates(boosted, origin, locales, note)

    async def _order(self, run: RetrievalRun, searched: FanOut, candidates: Candidates) -> Ordering:
        """Rerank (or restore a page token's order), precedence, diversity."""
        fused, cursor = candidates.fused, run.cursor
        if cursor.token is None and run.request.rerank and self.steps.reranker is not None:
            head = self.config.rerank_candidates  # the text the Reranker reads
            fused = await self._whole_rows(run, searched, fused[:head]) + fused[head:]
        with run.stages.stage("rerank") as span:
            hits, rerank = await self._rank(run, fused, searched.failed())
            _describe_rerank(span, rerank)
        reranked = cursor.token.reranked if cursor.token else reranked_positions(fused, hits)
        hits = exact_precedence(hits, self.config.exact_precedence)
        diversity = run.request.diversity
        ordered, note = await self.steps.diversity.run(hits, diversity, run.deadline)
        return Ordering(fused, ordered, rerank, reranked, note)

    async def _answer(
        self, run: RetrievalRun, searched: FanOut, candidates: Candidates, ordering: Ordering
    ) -> RetrievalResult:
        """This page of the order, its evidence, and what explains it."""
        request, prepared = run.request, run.prepared
        page = self._page(ordering.ordered, request, prepared, run.cursor.offset)
        hits = await self._whole_rows(run, searched, page.hits)
        hits = with_highlights(hits, self.steps.prepare.analyzer, prepared.plan)
        with run.stages.stage("evidence"):
            budget = request.context_char_budget or self.config.context_char_budget
            evidence = self.steps.evidence.assemble(hits, char_budget=budget)
        degraded, message = degradation(ordering.rerank, *_reported(searched))
        indexed = await self._page_indexed(run, hits)
        return RetrievalResult(
            hits,
            prepared.intent,
            prepared.text,
            ordering.rerank,
            evidence,
            _reported(searched),
            page_indexed=indexed,
            lexical_query=self.steps.describe_lexical(prepared.text) if request.debug else "",
            degraded=degraded,
            message=NOT_INDEXED if indexed is False else message,
            query_language=prepared.language.language,
            notes=self._notes(run, searched, candidates, ordering),
            next_page_token=self._next_token(run, candidates, ordering, page),
            hits_before=page.hits_before,
        )

    async def _page_indexed(self, run: RetrievalRun, hits: list[FusedHit]) -> bool | None:
        """A current-page request never falls back to site-wide results:
        whether its page is indexed (None: not asked, or unknown)."""
        if run.prepared.intent is not Intent.CURRENT_PAGE:
            return None
        return await self.steps.current_page.indexed(hits, run.prepared.scope, run.deadline)

    def _notes(
        self, run: RetrievalRun, searched: FanOut, candidates: Candidates, ordering: Ordering
    ) -> list[str]:
        """The answer's notes: the language rule, exact precedence, what the
        boosts and diversity did, and how locales were ranked apart."""
        prepared, debug = run.prepared, run.request.debug
        rule = self.config.exact_precedence
        precedence = precedence_note(ordering.candidates, prepared.plan.identifiers, rule)
        weight = question_weight_note(self.config, run.request, prepared.shape) if debug else ""
        said = (prepared.language.note, precedence, weight, candidates.note, ordering.note)
        notes = [note for note in said if note]
        lists = candidates.locales
        if lists.vector and searched.vector.ok:
            notes.append(balance_note(list(lists.vector), bool(lists.translated), lists.order))
            if debug:
                notes.extend(lists.translation_notes())
        if debug and searched.vector.ok:
            notes.append(lists.embedding_note())
        return notes

    def _next_token(
        self, run: RetrievalRun, candidates: Candidates, ordering: Ordering, page: Page
    ) -> str:
        """The token of the next page ("": this is the last)."""
        if page.next_offset is None:
            return ""
        return run.cursor.next_token(
            run.request,
            run.prepared.scope.visible_generation,
            ordering.candidates,
            ordering.reranked,
            page.next_offset,
            candidates.origin,
            self.steps.page_keys,
        )

    async def _whole_rows(
        self, run: RetrievalRun, searched: FanOut, hits: list[FusedHit]
    ) -> list[FusedHit]:
        """`hits` with whole rows (services.retriever.hit_rows), from a store
        whose channel answered."""
        if not any(hit.chunk.partial for hit in hits):
            return hits
        visible = run.prepared.scope.visible_generation
        with run.stages.stage("rows"):
            return await self.steps.rows.complete(hits, run.deadline, visible, searched.answered())

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
        self, run: RetrievalRun, fused: list[FusedHit], failed: list[str]
    ) -> tuple[list[FusedHit], RerankOutcome]:
        """Rerank the first page; a later page restores the first page's order
        (services.retriever.paging) rather than asking the Reranker again."""
        cursor = run.cursor
        if cursor.token is None:
            rerank = run.request.rerank
            return await self.steps.rerank.run(run.prepared.text, fused, rerank, run.deadline)
        hits = cursor.restore(fused, failed)
        code = RerankCode.RERANKED if cursor.token.reranked else RerankCode.OFF
        reason = "the first page's order, carried by page_token"
        return hits, RerankOutcome(code, used=bool(cursor.token.reranked), reason=reason)


def _reported(searched: FanOut) -> list[ChannelOutcome]:
    """The channels the answer reports: vector and lexical, and the
    cross-lingual one when it was asked for or a rule left it out."""
    channels = [searched.vector, searched.lexical]
    if searched.cross_lingual.requested or searched.cross_lingual.by_rule:
        channels.append(searched.cross_lingual)
    return channels


def _describe_rerank(span: trace.Span, rerank: RerankOutcome) -> None:
    span.set_attribute("rag.rerank.candidates", rerank.candidates)
    span.set_attribute("rag.rerank.reranked", rerank.reranked)
    span.set_attribute("rag.rerank.fallback", rerank.fallback)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000
