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
from services.retriever.channels import ChannelOutcome
from services.retriever.current_page import NOT_INDEXED
from services.retriever.degradation import degradation
from services.retriever.evidence import with_highlights
from services.retriever.exact import exact_precedence, precedence_note
from services.retriever.fan_out import FanOut
from services.retriever.language import check_language  # re-exported for its importers
from services.retriever.locale_balance import balance_note
from services.retriever.pages import MAX_GROUP_SIZE, Page, page_of
from services.retriever.paging import PageCursor, Ranking
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
from services.retriever.types import FusedHit, Intent

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
        """Learn whether the Reranker serves, and how many passages it takes,
        before the first request (on the event loop that serves the requests)."""
        if self.steps.reranker_health is not None:
            await self.steps.reranker_health.start()
        if self.steps.rerank.limit is not None:
            await self.steps.rerank.limit.learn()

    async def close(self) -> None:
        """Stop watching the Reranker and release its channel."""
        if self.steps.reranker_health is not None:
            await self.steps.reranker_health.stop()
        if self.steps.rerank.limit is not None:
            await self.steps.rerank.limit.stop()
        if self.steps.reranker is not None:
            await self.steps.reranker.close()

    async def retrieve(self, request: RetrievalRequest, deadline: Deadline) -> RetrievalResult:
        stages = StageRecorder(self.steps.tracer)
        started = time.perf_counter()
        run = await self._begin(request, deadline, stages)
        searched = await self.steps.fan_out.run(run.prepared, deadline, stages)
        for outcome in _reported(searched):  # vector and lexical timed even when not asked
            stages.record(outcome.channel.value, outcome.latency_ms)
        candidates = await self._candidates(run, searched, stages)
        ordering = await self._order(run, searched, candidates, stages)
        answer = await self._answer(run, searched, candidates, ordering, stages)
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
        # A token from an earlier generation is checked against the rebuilt
        # list (`PageCursor.restore`): a commit elsewhere leaves it valid.
        return RetrievalRun(request, prepared, cursor, deadline)

    async def _candidates(
        self, run: RetrievalRun, searched: FanOut, stages: StageRecorder
    ) -> Candidates:
        """Fusion, the caps and the boosts: the candidates."""
        request, prepared = run.request, run.prepared
        origin = request.boosts.recency_origin() or run.cursor.origin(datetime.now(UTC))
        with stages.stage("fusion") as span:
            fused = self.steps.fusion.fuse(request, prepared, searched)
            hits = fused.hits
            if prepared.plan.identifiers:  # a vector-only hit's are read from its text
                hits = await self._whole_rows(run, searched, hits, stages)
            hits = self.steps.fusion.place(request, prepared, hits, searched.lexical)
            boosted, note = await self.steps.boosts.run(hits, request.boosts, origin, run.deadline)
            span.set_attribute("rag.candidates", len(boosted))
        return Candidates(boosted, origin, fused.locales, fused.weight_note, note)

    async def _order(
        self, run: RetrievalRun, searched: FanOut, candidates: Candidates, stages: StageRecorder
    ) -> Ordering:
        """Rerank (or restore a page token's order), precedence, diversity."""
        fused, identifiers = candidates.fused, run.prepared.plan.identifiers
        if run.cursor.token is None and run.request.rerank and self.steps.reranker is not None:
            head = self.config.rerank_candidates  # the text the Reranker reads
            fused = await self._whole_rows(run, searched, fused[:head], stages) + fused[head:]
        with stages.stage("rerank") as span:
            reranked, rerank = await self._rank(run, fused, searched.failed)
            _describe_rerank(span, rerank)
        precedence = precedence_note(fused, identifiers, self.config.exact_precedence)
        hits = exact_precedence(reranked, self.config.exact_precedence)
        diversity = run.request.diversity
        ordered, note = await self.steps.diversity.run(hits, diversity, run.deadline)
        return Ordering(fused, reranked, ordered, rerank, precedence, note)

    async def _answer(
        self,
        run: RetrievalRun,
        searched: FanOut,
        candidates: Candidates,
        ordering: Ordering,
        stages: StageRecorder,
    ) -> RetrievalResult:
        """This page of the order, its evidence, and what explains it."""
        request, prepared = run.request, run.prepared
        page = self._page(run, candidates, ordering)
        hits = await self._whole_rows(run, searched, page.hits, stages)
        hits = with_highlights(hits, self.steps.prepare.analyzer, prepared.plan)
        with stages.stage("evidence"):
            budget = request.context_char_budget or self.config.context_char_budget
            evidence = self.steps.evidence.assemble(hits, char_budget=budget)
        channels = _reported(searched)
        degraded, message = degradation(ordering.rerank, *channels)
        indexed = await self._page_indexed(run, hits)
        return RetrievalResult(
            hits,
            prepared.intent,
            prepared.text,
            ordering.rerank,
            evidence,
            channels,
            page_indexed=indexed,
            lexical_query=self.steps.describe_lexical(prepared.text) if request.debug else "",
            degraded=degraded,
            message=NOT_INDEXED if indexed is False else message,
            query_language=prepared.language.language,
            notes=self._notes(run, searched, candidates, ordering),
            next_page_token=page.next_token,
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
        said = (
            prepared.language.note,
            ordering.precedence_note,
            candidates.weight_note,
            candidates.note,
            ordering.note,
        )
        notes = [note for note in said if note]
        lists = candidates.locales
        if crowded := lists.groups.crowded_note():
            notes.append(crowded)
        if widened := lists.groups.filter_tags:
            notes.append(
                f"locale filter {prepared.scope.locale!r}: no page carries that tag; searched "
                f"the pages tagged {', '.join(widened)} (its language, a tag wider or narrower)"
            )
        if lists.vector and searched.vector.ok:
            notes.append(balance_note(list(lists.vector), bool(lists.translated), lists.order))
            if debug:
                notes.extend(lists.translation_notes())
        if debug and searched.vector.ok:
            notes.append(lists.embedding_note())
        return notes

    def _page(self, run: RetrievalRun, candidates: Candidates, ordering: Ordering) -> Page:
        """top_k hits, or top_k documents' groups (services.retriever.pages),
        from the cursor's offset on, with the next page's token."""
        request, prepared = run.request, run.prepared
        size = 0
        if request.group_by_document:
            size = request.max_chunks_per_document or self.config.max_chunks_per_document
        group_size = min(size, MAX_GROUP_SIZE)
        page = page_of(ordering.ordered, run.cursor.offset, prepared.top_k, group_size)
        if page.next_offset is None:
            return page
        ranking = Ranking(
            ordering.candidates,
            ordering.reranked,
            candidates.origin,
            prepared.scope.visible_generation,
        )
        token = run.cursor.next_token(request, ranking, page.next_offset, self.steps.page_keys)
        return replace(page, next_token=token)

    async def _whole_rows(
        self, run: RetrievalRun, searched: FanOut, hits: list[FusedHit], stages: StageRecorder
    ) -> list[FusedHit]:
        """`hits` with whole rows (services.retriever.hit_rows), from a store
        whose channel answered."""
        if not any(hit.chunk.partial for hit in hits):
            return hits
        visible = run.prepared.scope.visible_generation
        with stages.stage("rows"):
            answered = list(searched.answered)
            return await self.steps.rows.complete(hits, run.deadline, visible, answered)

    async def _rank(
        self, run: RetrievalRun, fused: list[FusedHit], failed: tuple[str, ...]
    ) -> tuple[list[FusedHit], RerankOutcome]:
        """Rerank the first page; a later page restores the first page's order
        (services.retriever.paging) rather than asking the Reranker again."""
        cursor = run.cursor
        if cursor.token is None:
            rerank = run.request.rerank
            return await self.steps.rerank.run(run.prepared.text, fused, rerank, run.deadline)
        hits = cursor.restore(fused, failed, run.prepared.scope.visible_generation)
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
