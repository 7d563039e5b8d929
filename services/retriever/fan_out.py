"""The channels of one Retrieve at once: the query embedded (with its
translations for other-language locales) and searched in the vector store,
its analysed plan searched in the lexical store, and, where the index has a
second vector (RAG_CROSS_LINGUAL_MODEL), the query embedded by that model and
searched by it; each within min(channel timeout, time left − margin), each
degrading on its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor

from services.core.analysis import QueryPlan
from services.core.analysis.analyzer import TextAnalyzer
from services.core.deadline import Deadline
from services.core.models import ScopeFilter, ScoredChunk
from services.embedding.embedder import Embedder
from services.retriever.channels import ChannelOutcome, call_as, not_requested, run_channel
from services.retriever.locale_balance import LocaleLists, LocaleSearch
from services.retriever.requests import PreparedQuery, RetrievalConfig
from services.retriever.stages import StageRecorder
from services.retriever.types import Channel
from services.storage.base import SECOND_VECTOR, LexicalStore, VectorQuery, VectorStore

Outcomes = tuple[ChannelOutcome, ChannelOutcome, ChannelOutcome]


class ChannelFanOut:
    def __init__(
        self,
        embedder: Embedder,
        lexical: LexicalStore,
        analyzer: TextAnalyzer,
        locale_search: LocaleSearch,
        executor: Executor,
        config: RetrievalConfig,
        cross_lingual: Embedder | None = None,
        vectors: VectorStore | None = None,
    ) -> None:
        """`cross_lingual`: the model of the chunks' second vector in
        `vectors` (None: no such channel)."""
        self.embedder, self.lexical, self.analyzer = embedder, lexical, analyzer
        self.locale_search, self.executor, self.config = locale_search, executor, config
        self.cross_lingual, self.vectors = cross_lingual, vectors

    async def run(
        self,
        prepared: PreparedQuery,
        deadline: Deadline,
        stages: StageRecorder,
        balanced: LocaleLists,
    ) -> Outcomes:
        """The vector, lexical and cross-lingual channels' outcomes;
        `balanced` receives the locales the vector channel ranked apart."""
        channel_s, margin_s = (
            self.config.channel_timeout_ms / 1000,
            self.config.safety_margin_ms / 1000,
        )
        # The read of the scope's locales (when due) is bounded as a channel is.
        locales = await self._locales(
            prepared.scope, deadline.shortened(margin_s).capped(channel_s)
        )
        budget_s = deadline.budget(channel_s, margin_s)
        query, depth, scope, plan = prepared.text, prepared.depth, prepared.scope, prepared.plan
        # The stores get the channel's own deadline: a server store's query
        # ends there too, instead of holding a worker thread past the channel.
        searches_end = Deadline.after(budget_s)
        self.locale_search.translate(query, prepared.language.language, locales, balanced)

        def vector_search() -> list[ScoredChunk]:
            texts = [query, *(t.text for t in balanced.translations.values())]
            with stages.stage("embedding"):
                vectors = call_as("embedding", self.embedder.embed_queries, texts)
            with stages.stage("vector_search", timed=False) as span:
                hits = self.locale_search.vector(
                    vectors.tolist(), depth, scope, balanced, searches_end
                )
                span.set_attribute("rag.hits", len(hits))
            return hits

        def lexical_search() -> list[ScoredChunk]:
            with stages.stage("lexical_search", timed=False) as span:
                # The plan made by the pipeline's `_prepare` (the store's own
                # analysis, so the same terms the store would derive from `query`).
                hits = self._lexical_search(plan, depth, scope, searches_end)
                span.set_attribute("rag.hits", len(hits))
                search = self._lexical_search_text
                self.locale_search.translated_lexical(depth, scope, search, balanced, searches_end)
            return hits

        def cross_lingual_search() -> list[ScoredChunk]:
            return self._cross_lingual_search(query, depth, scope, searches_end)

        cross_lingual = (
            self._maybe_run(
                Channel.CROSS_LINGUAL, prepared.channels, cross_lingual_search, budget_s
            )
            if self.cross_lingual is not None
            else _not_requested(Channel.CROSS_LINGUAL)
        )
        results = await asyncio.gather(
            self._maybe_run(Channel.VECTOR, prepared.channels, vector_search, budget_s),
            self._maybe_run(Channel.LEXICAL, prepared.channels, lexical_search, budget_s),
            cross_lingual,
        )
        return results[0], results[1], results[2]

    def _cross_lingual_search(
        self, query: str, depth: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        """One search of the second vector over every locale: a model trained
        on translation pairs need not rank each locale apart."""
        assert self.cross_lingual is not None and self.vectors is not None
        vector = call_as("cross_lingual_embedding", self.cross_lingual.embed_query, query)
        search = VectorQuery(vector.tolist(), depth, scope, using=SECOND_VECTOR)
        return call_as("cross_lingual", self.vectors.search_many, [search], deadline)[0]

    async def _locales(self, scope: ScopeFilter, deadline: Deadline) -> tuple[str, ...]:
        """The locales the request's scope holds, to rank apart: cached, or
        read in a worker thread by `deadline` (a read that runs out of time
        keeps the scope's last reading, or ranks one list)."""
        cached = self.locale_search.cached_locales(scope)
        if cached is not None:
            return cached
        loop = asyncio.get_running_loop()
        read = loop.run_in_executor(self.executor, self.locale_search.read_locales, scope, deadline)
        try:
            return await asyncio.wait_for(read, deadline.timeout_or_none())
        except TimeoutError:
            return self.locale_search.last_locales(scope)

    def _lexical_search(
        self, plan: QueryPlan, depth: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        """`search_plan`: the plan was made with the store's own analyzer
        (`storage.analyzer`), so the store need not analyse `query` again."""
        return self.lexical.search_plan(plan, depth, scope, deadline)

    def _lexical_search_text(
        self, text: str, depth: int, scope: ScopeFilter, deadline: Deadline | None
    ) -> list[ScoredChunk]:
        plan = self.analyzer.plan(text)
        return call_as("lexical", self.lexical.search_plan, plan, depth, scope, deadline)

    async def _maybe_run(
        self,
        channel: Channel,
        wanted: frozenset[Channel],
        search: Callable[[], list[ScoredChunk]],
        budget_s: float,
    ) -> ChannelOutcome:
        if channel not in wanted:
            return not_requested(channel)
        return await run_channel(channel, self.executor, search, budget_s)


async def _not_requested(channel: Channel) -> ChannelOutcome:
    return not_requested(channel)
