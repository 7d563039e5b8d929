"""The channels of one Retrieve at once: the query embedded (with its
translations for other-language locales) and searched in the vector store,
its analysed plan searched in the lexical store, and, where the index has a
second vector (RAG_CROSS_LINGUAL_MODEL), the query embedded by that model and
searched by it: a model of several languages where the scope holds several
locales (it crosses them), a model of one language (packaged:bge-small-en)
for questions and pages in that language (a second voice); each within
min(channel timeout, time left − margin), each degrading on its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from functools import partial

from services.core.analysis.analyzer import TextAnalyzer
from services.core.analysis.query_translation import Translation
from services.core.deadline import Deadline
from services.core.models import ScopeFilter, ScoredChunk
from services.embedding.embedder import Embedder
from services.retriever.channels import (
    ChannelOutcome,
    call_as,
    not_requested,
    run_channel,
    run_channel_with,
    skipped_by_rule,
)
from services.retriever.locale_balance import LocaleLists
from services.retriever.locale_groups import LocaleGroups, merged_by_score
from services.retriever.locale_search import LocaleSearch, filter_scopes
from services.retriever.requests import PreparedQuery, RetrievalConfig
from services.retriever.scope_locales import scope_key
from services.retriever.second_model import SecondModel
from services.retriever.stages import StageRecorder
from services.retriever.tail_reserve import TailReserve
from services.retriever.translation_deferral import TranslationDeferral, needed_translations
from services.retriever.types import Channel
from services.storage.base import SECOND_VECTOR, LexicalStore, VectorQuery, VectorStore

NO_LISTS: dict[str, list[ScoredChunk]] = {}  # a channel that did not answer
WAITS_NOTE = "its locales' lists wait (best cross-lingual cosine far below the leader's)"
NO_LANGUAGE_TO_CROSS = (
    "no language to cross: the request's locales are not ranked apart and the first model "
    "reads the question"
)


@dataclass(frozen=True)
class FanOut:
    """What the channels found: each channel's outcome, and the per-locale
    lists when locales were ranked apart (`locales.locales` empty: one list);
    with what the later steps read of the outcomes, taken once (`of`)."""

    vector: ChannelOutcome
    lexical: ChannelOutcome
    cross_lingual: ChannelOutcome
    locales: LocaleLists
    answered: tuple[Channel, ...]  # the stores whose channel answered (rows come from)
    failed: tuple[str, ...]  # the requested channels that did not answer

    @classmethod
    def of(
        cls,
        vector: ChannelOutcome,
        lexical: ChannelOutcome,
        cross_lingual: ChannelOutcome,
        locales: LocaleLists,
    ) -> FanOut:
        answered = tuple(o.channel for o in (vector, lexical) if o.ok)
        outcomes = (vector, lexical, cross_lingual)
        failed = tuple(o.channel.value for o in outcomes if o.requested and not o.ok)
        return cls(vector, lexical, cross_lingual, locales, answered, failed)


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
        reserve: TailReserve | None = None,
        reads: Executor | None = None,
        deferral: TranslationDeferral | None = None,
    ) -> None:
        """`executor` runs the channels' searches (their embeddings included);
        `reads` the short read of a scope's locales (default: `executor`), kept
        apart so that slow searches cannot keep it waiting. `cross_lingual`:
        the model of the chunks' second vector in `vectors` (None: no such
        channel). `reserve`: the time kept back for the rest of the request
        when the caller's deadline ends the channels (shared with the rerank
        step, which learns it; default: the configured safety margin).
        `deferral`: which scopes' translated questions wait for the
        cross-lingual channel's verdict (learnt from the verdicts)."""
        self.embedder, self.lexical, self.analyzer = embedder, lexical, analyzer
        self.locale_search, self.executor, self.config = locale_search, executor, config
        self.reads = reads or executor
        self.cross_lingual, self.vectors = cross_lingual, vectors
        self.second = SecondModel.of(cross_lingual) if cross_lingual is not None else None
        self.reserve = reserve or TailReserve(floor_s=config.safety_margin_ms / 1000)
        self.order_rules = config.order_rules()
        self.deferral = deferral or TranslationDeferral(config.translation_deferral_share)

    async def run(
        self, prepared: PreparedQuery, deadline: Deadline, stages: StageRecorder
    ) -> FanOut:
        """The vector, lexical and cross-lingual channels' outcomes, and the
        locales the vector channel ranked apart with their lists."""
        channel_s = self.config.channel_timeout_ms / 1000
        margin_s = self.reserve.margin_within(deadline)
        # The read of the scope's locales (when due) is bounded as a channel is.
        groups = await self._locales(
            prepared.scope, deadline.shortened(margin_s).capped(channel_s), stages
        )
        locales = groups.names
        budget_s = deadline.budget(channel_s, margin_s)
        translations = self.locale_search.translate(
            prepared.text, prepared.language.language, locales
        )
        asked = LocaleLists(locales, groups=groups, translations=translations)
        verdict_key = self._verdict_key(prepared, asked)
        deferred = verdict_key is not None and self.deferral.defers(verdict_key)
        # The stores get the channel's own deadline: a server store's query
        # ends there too, instead of holding a worker thread past the channel.
        end = Deadline.after(budget_s)
        searches = _Searches(self, prepared, asked, stages, end, deferred)
        (vector, by_locale), (lexical, translated), cross_lingual = await asyncio.gather(
            self._maybe_run(Channel.VECTOR, prepared, searches.vector, budget_s),
            self._maybe_run(Channel.LEXICAL, prepared, searches.lexical, budget_s),
            self._cross_lingual(prepared, locales, searches.cross_lingual, budget_s),
        )
        if verdict_key is not None:
            needed = self._needed_translations(prepared, asked, cross_lingual)
            self.deferral.observe(verdict_key, not needed)
            if deferred and vector.ok:
                vector, by_locale, asked = await self._translations_searched(
                    prepared, asked, (vector, by_locale), needed, searches
                )
        question_vector = searches.question_vector if vector.ok else {}
        found = replace(
            asked, vector=by_locale, translated=translated, question_vector=question_vector
        )
        return FanOut.of(vector, lexical, cross_lingual, found)

    def _verdict_key(self, prepared: PreparedQuery, asked: LocaleLists) -> Hashable | None:
        """The scope whose verdicts decide whether its translations' vectors
        wait for the cross-lingual channel (services.retriever.translation_deferral),
        or None where that channel cannot tell: it must run and cross
        languages, and the rule must be able to make a locale wait."""
        second, wanted = self.second, prepared.channels
        can_tell = (
            bool(asked.translations)
            and second is not None
            and second.crosses
            and {Channel.VECTOR, Channel.CROSS_LINGUAL} <= wanted
            and not prepared.language.skip_vector
            and self.order_rules.for_shape(prepared.shape).may_wait
        )
        return scope_key(prepared.scope) if can_tell else None

    def _needed_translations(
        self, prepared: PreparedQuery, asked: LocaleLists, cross_lingual: ChannelOutcome
    ) -> dict[str, Translation]:
        rule = self.order_rules.for_shape(prepared.shape)
        hits = cross_lingual.hits if cross_lingual.ok else None
        return needed_translations(
            rule, prepared.language.language, asked.locales, asked.translations, hits
        )

    async def _translations_searched(
        self,
        prepared: PreparedQuery,
        asked: LocaleLists,
        question: tuple[ChannelOutcome, dict[str, list[ScoredChunk]]],
        needed: dict[str, Translation],
        searches: _Searches,
    ) -> tuple[ChannelOutcome, dict[str, list[ScoredChunk]], LocaleLists]:
        """The vector channel's deferred half: the `needed` translations
        embedded and searched in their languages' locales. One not searched
        in time leaves its locales with the question's hits (the notes say so)."""
        vector, by_locale = question
        skipped = {
            language: WAITS_NOTE for language in asked.translations if language not in needed
        }
        if needed:
            search = partial(searches.translated_vector, needed, by_locale)
            budget_s = searches.searches_end.budget()
            outcome, merged = await run_channel_with(
                Channel.VECTOR, self.executor, search, budget_s, None
            )
            if merged is None:
                skipped |= {language: f"not searched: {outcome.error}" for language in needed}
            else:
                by_locale = merged
                latency_ms = vector.latency_ms + outcome.latency_ms
                vector = replace(vector, hits=outcome.hits, latency_ms=latency_ms)
        return vector, by_locale, replace(asked, not_embedded=skipped)

    async def _locales(
        self, scope: ScopeFilter, deadline: Deadline, stages: StageRecorder
    ) -> LocaleGroups:
        """The locale lists the request's scope holds, to rank apart: cached, or
        read in a worker thread by `deadline` (a read that runs out of time
        keeps the scope's last reading, or ranks one list). Only a read is
        timed, as the stage `locales`: when it read every manifest document,
        the 1M-chunk p99 it caused showed in no stage
        (bench/results/notes/locale_read_tail.md)."""
        cached = self.locale_search.cached_locales(scope)
        if cached is not None:
            return cached
        loop = asyncio.get_running_loop()
        with stages.stage("locales"):
            read = loop.run_in_executor(
                self.reads, self.locale_search.read_locales, scope, deadline
            )
            try:
                return await asyncio.wait_for(read, deadline.timeout_or_none())
            except TimeoutError:
                return self.locale_search.last_locales(scope)

    async def _maybe_run(
        self,
        channel: Channel,
        prepared: PreparedQuery,
        search: Callable[[], tuple[list[ScoredChunk], dict[str, list[ScoredChunk]]]],
        budget_s: float,
    ) -> tuple[ChannelOutcome, dict[str, list[ScoredChunk]]]:
        """`channel` searched, unless not asked for or left out by the
        language rule (the model does not read the question's language)."""
        if channel is Channel.VECTOR and prepared.language.skip_vector:
            return skipped_by_rule(channel, prepared.language.note), NO_LISTS
        if channel not in prepared.channels:
            return not_requested(channel), NO_LISTS
        return await run_channel_with(channel, self.executor, search, budget_s, NO_LISTS)

    async def _cross_lingual(
        self,
        prepared: PreparedQuery,
        locales: tuple[str, ...],
        search: Callable[[], list[ScoredChunk]],
        budget_s: float,
    ) -> ChannelOutcome:
        """The second vector's channel. A model of several languages runs
        where it crosses languages: the request's locales are ranked apart,
        or the first model cannot read the question (its vector channel left
        out: the second stands in), or the request asked for this channel
        alone. Otherwise it is skipped by rule: mUSE fused in one language
        lowered SciFact (hybrid nDCG@10 0.7018 -> 0.6848) and let unrelated
        pages outvote a lexical exact match. A model of one language runs
        wherever it reads the question and some of the scope's pages."""
        wanted, second = prepared.channels, self.second
        if second is None or Channel.CROSS_LINGUAL not in wanted:
            return not_requested(Channel.CROSS_LINGUAL)
        if not second.crosses:
            known = locales or tuple(filter(None, [prepared.scope.locale]))
            if unread := second.unread(prepared.language.language, known):
                return skipped_by_rule(Channel.CROSS_LINGUAL, unread)
            return await run_channel(Channel.CROSS_LINGUAL, self.executor, search, budget_s)
        crossing = bool(locales) or Channel.VECTOR not in wanted
        if not crossing and wanted != {Channel.CROSS_LINGUAL}:
            return skipped_by_rule(Channel.CROSS_LINGUAL, NO_LANGUAGE_TO_CROSS)
        return await run_channel(Channel.CROSS_LINGUAL, self.executor, search, budget_s)


class _Searches:
    """One request's blocking searches, each run in a worker thread by its
    channel; each returns what it found (hits, and the per-locale lists)."""

    def __init__(
        self,
        fan_out: ChannelFanOut,
        prepared: PreparedQuery,
        asked: LocaleLists,
        stages: StageRecorder,
        searches_end: Deadline,
        deferred: bool = False,
    ) -> None:
        """`deferred`: the vector channel embeds the question alone; its
        translations come later (`translated_vector`), if at all."""
        self.fan_out, self.prepared = fan_out, prepared
        self.asked = asked
        # What the vector channel embeds first: the question, and its
        # translations unless they are deferred.
        self.embedded_first = replace(asked, translations={}) if deferred else asked
        # Per locale, the question's vector hits where a translation's were
        # merged in (LocaleLists.question_vector): written by the searches.
        self.question_vector: dict[str, list[ScoredChunk]] = {}
        self.stages, self.searches_end = stages, searches_end

    def vector(self) -> tuple[list[ScoredChunk], dict[str, list[ScoredChunk]]]:
        prepared, asked, fan_out = self.prepared, self.embedded_first, self.fan_out
        texts = [prepared.text, *(t.text for t in asked.translations.values())]
        with self.stages.stage("embedding"):
            # The searches' end: past it the channel has given up, and a query
            # still queued for the model is withdrawn rather than holding this thread.
            end = self.searches_end.on_monotonic_clock()
            embed = partial(fan_out.embedder.embed_queries, partition=prepared.cache_partition)
            vectors = call_as("embedding", embed, texts, end)
        with self.stages.stage("vector_search", timed=False) as span:
            hits, by_locale, self.question_vector = fan_out.locale_search.vector(
                vectors.tolist(), prepared.depth, prepared.scope, asked, self.searches_end
            )
            span.set_attribute("rag.hits", len(hits))
        return hits, by_locale

    def translated_vector(
        self,
        translations: Mapping[str, Translation],
        by_locale: dict[str, list[ScoredChunk]],
    ) -> tuple[list[ScoredChunk], dict[str, list[ScoredChunk]]]:
        """The deferred translations embedded (one pass) and searched in
        their languages' locales, merged into the question's `by_locale`."""
        prepared, fan_out = self.prepared, self.fan_out
        with self.stages.stage("translation"):
            end = self.searches_end.on_monotonic_clock()
            embed = partial(fan_out.embedder.embed_queries, partition=prepared.cache_partition)
            texts = [translation.text for translation in translations.values()]
            vectors = call_as("embedding", embed, texts, end).tolist()
            by_language = dict(zip(translations, vectors, strict=True))
            hits, merged, question_alone = fan_out.locale_search.translated_vector(
                by_language,
                prepared.depth,
                prepared.scope,
                by_locale,
                self.searches_end,
                self.asked.groups,
            )
        self.question_vector = {**self.question_vector, **question_alone}
        return hits, merged

    def lexical(self) -> tuple[list[ScoredChunk], dict[str, list[ScoredChunk]]]:
        prepared, end = self.prepared, self.searches_end
        depth, scope = prepared.depth, prepared.scope
        with self.stages.stage("lexical_search", timed=False) as span:
            # `search_plan`: the plan was made with the store's own analyzer
            # (services.retriever.prepare), so the store need not analyse
            # the query again.
            lexical = self.fan_out.lexical
            found = [
                lexical.search_plan(prepared.plan, depth, each, end)
                for each in filter_scopes(scope, self.asked.groups)
            ]
            hits = merged_by_score(found, depth)
            span.set_attribute("rag.hits", len(hits))
            translated = self.fan_out.locale_search.translated_lexical(
                depth, scope, self._lexical_text, self.asked, end
            )
        return hits, translated

    def cross_lingual(self) -> list[ScoredChunk]:
        """The second vector's hits, best first: one search per locale (that
        the model reads) where locales are ranked apart, so each locale's best
        cosine is read whatever the others' (services.retriever.locale_order
        weighs it), else one search over the scope."""
        fan_out, prepared = self.fan_out, self.prepared
        assert fan_out.second is not None and fan_out.vectors is not None
        embed = partial(fan_out.second.embedder.embed_query, partition=prepared.cache_partition)
        end = self.searches_end.on_monotonic_clock()
        vector = call_as("cross_lingual_embedding", embed, prepared.text, end).tolist()
        locales = fan_out.second.pages(self.asked.locales)
        tags = [tag for locale in locales for tag in self.asked.groups.tags_of(locale)]
        scopes = [replace(prepared.scope, locale=tag) for tag in tags]
        searches = [
            VectorQuery(vector, prepared.depth, scope, using=SECOND_VECTOR)
            for scope in scopes or filter_scopes(prepared.scope, self.asked.groups)
        ]
        found = call_as("cross_lingual", fan_out.vectors.search_many, searches, self.searches_end)
        # One list over a scope of several locales (the first model does not rank them
        # apart): a one-language model's hits on pages it cannot read are noise.
        heard = (hit for hits in found for hit in hits if fan_out.second.reads_page(hit))
        return sorted(heard, key=lambda hit: -hit.score)

    def _lexical_text(
        self, text: str, depth: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        plan = self.fan_out.analyzer.plan(text)
        return call_as("lexical", self.fan_out.lexical.search_plan, plan, depth, scope, deadline)
