"""The searches of a Retrieve whose locales matter (services.retriever.locale_balance,
steps 1 and 2): the vector channel per locale list, the translated question
per other-language list, and a locale filter widened to the tags of its
language that the scope's pages carry (services.retriever.locale_groups)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from services.core.analysis import primary_language
from services.core.analysis.query_translation import QueryTranslator, Translation
from services.core.deadline import Deadline
from services.core.models import ScopeFilter, ScoredChunk
from services.retriever.channels import call_as
from services.retriever.locale_balance import LocaleLists, other_language
from services.retriever.locale_groups import (
    LocaleGroups,
    distinct_hits,
    merged_by_score,
    widened_filter,
)
from services.retriever.locale_turns import interleaved
from services.retriever.scope_locales import IndexLocales
from services.retriever.vector_batching import VectorSearchBatcher
from services.storage.base import VectorQuery, VectorStore


class LocaleSearch:
    """Steps 1 and 2's searches: the vector channel per locale, and the
    translated question per other-language locale. Decides whether locales
    are ranked apart at all: only for a model that reads every language
    (`enabled`), a request that fixes no locale, and an index with locales
    of more than one."""

    def __init__(
        self,
        vectors: VectorStore,
        locales: IndexLocales | None,
        enabled: bool,
        translator: QueryTranslator | None = None,
        max_batched_searches: int = 1,
    ) -> None:
        """`max_batched_searches`: concurrent requests' vector searches share
        one store call, at most this many (`vector_batching`; 1: alone)."""
        self.vectors, self.locales, self.translator = vectors, locales, translator
        self.searches = VectorSearchBatcher(vectors, max_batched_searches)
        self.enabled = enabled and locales is not None

    def balances(self, scope: ScopeFilter) -> bool:
        """Whether the request's locales may be ranked apart at all (before
        knowing which locales its scope holds)."""
        return self.enabled and self.locales is not None and not scope.locale

    def cached_locales(self, scope: ScopeFilter) -> LocaleGroups | None:
        """The locale lists to rank apart without a read (None: a read is due)."""
        if not self._reads(scope) or self.locales is None:
            return LocaleGroups()
        found = self.locales.cached(scope)
        return None if found is None else _groups(scope, found)

    def read_locales(self, scope: ScopeFilter, deadline: Deadline) -> LocaleGroups:
        """The locale lists to rank apart: one per language the scope's
        locales name, when more than one (services.retriever.locale_groups);
        or, for a request with a locale filter, the tags it selects."""
        if not self._reads(scope) or self.locales is None:
            return LocaleGroups()
        return _groups(scope, self.locales.current(scope, deadline))

    def last_locales(self, scope: ScopeFilter) -> LocaleGroups:
        """As `read_locales` from the last reading (a read that ran out of time)."""
        if not self._reads(scope) or self.locales is None:
            return LocaleGroups()
        return _groups(scope, self.locales.last(scope))

    def _reads(self, scope: ScopeFilter) -> bool:
        """Whether the scope's locales are read: to rank them apart, or to
        widen a locale filter (whatever the model)."""
        return self.balances(scope) or (self.locales is not None and bool(scope.locale))

    def translate(
        self, query: str, language: str, locales: tuple[str, ...]
    ) -> dict[str, Translation]:
        """The question in the language of each other-language locale of
        `locales`, by language: once per language, however many locale tags
        share it."""
        translations: dict[str, Translation] = {}
        if self.translator is None:
            return translations
        for target in dict.fromkeys(primary_language(locale) for locale in locales):
            if other_language(language, target):
                translation = self.translator.translate(query, language, target)
                if translation is not None:
                    translations[target] = translation
        return translations

    def vector(
        self,
        vectors: list[list[float]],
        depth: int,
        scope: ScopeFilter,
        lists: LocaleLists,
        deadline: Deadline,
    ) -> tuple[list[ScoredChunk], dict[str, list[ScoredChunk]], dict[str, list[ScoredChunk]]]:
        """One search, or one per locale of `lists.locales`: the channel's
        own list (the locales' lists in turns) and each locale's list.
        `vectors`: the question's, then one per translation in
        `lists.translations`; in a locale with a translation (of its
        language), the question's and the translation's hits take turns
        (and the question's alone come third, by locale)."""
        if not lists.locales:
            scopes = filter_scopes(scope, lists.groups)
            only = [VectorQuery(vectors[0], depth, each) for each in scopes]
            found = call_as("vector", self.searches.search_many, only, deadline)
            return merged_by_score(found, depth), {}, {}
        by_language = dict(zip(lists.translations, vectors[1:], strict=True))
        per_locale = {
            locale: [vectors[0], *_present(by_language.get(primary_language(locale)))]
            for locale in lists.locales
        }
        wanted = [(locale, vector) for locale, its in per_locale.items() for vector in its]
        answers = iter(self._searched(wanted, depth, scope, lists.groups, deadline))
        found = {locale: [next(answers) for _ in vectors] for locale, vectors in per_locale.items()}
        by_locale = {locale: found[locale][0] for locale in per_locale}
        return self.translated_vector({}, depth, scope, by_locale, deadline, lists.groups, found)

    def _searched(
        self,
        wanted: Sequence[tuple[str, list[float]]],
        depth: int,
        scope: ScopeFilter,
        groups: LocaleGroups,
        deadline: Deadline,
    ) -> list[list[ScoredChunk]]:
        """Each (locale list, vector) of `wanted` searched in every tag of
        its list, all as one store call (one pass over the segments), the
        tags' hits merged by score."""
        tags = [groups.tags_of(locale) for locale, _ in wanted]
        queries = [
            VectorQuery(vector, depth, replace(scope, locale=tag))
            for (_, vector), its in zip(wanted, tags, strict=True)
            for tag in its
        ]
        answers = iter(call_as("vector", self.searches.search_many, queries, deadline))
        return [merged_by_score([next(answers) for _ in its], depth) for its in tags]

    def translated_vector(
        self,
        vectors: Mapping[str, list[float]],
        depth: int,
        scope: ScopeFilter,
        by_locale: Mapping[str, list[ScoredChunk]],
        deadline: Deadline,
        groups: LocaleGroups,
        found: Mapping[str, list[list[ScoredChunk]]] | None = None,
    ) -> tuple[list[ScoredChunk], dict[str, list[ScoredChunk]], dict[str, list[ScoredChunk]]]:
        """`by_locale` (the question's hits per locale) with each
        translation's vector (`vectors`, by language) searched in the
        locales of its language (or the lists already `found` there, the
        question's first), the two lists taking turns there: the channel's
        list, each locale's, and the question's own hits in each locale
        where a translation's were merged in."""
        wanted = [
            (locale, vectors[primary_language(locale)])
            for locale in by_locale
            if primary_language(locale) in vectors
        ]
        lists = {locale: [hits] for locale, hits in by_locale.items()} | dict(found or {})
        if wanted:
            answers = self._searched(wanted, depth, scope, groups, deadline)
            for (locale, _), hits in zip(wanted, answers, strict=True):
                lists[locale] = [by_locale[locale], hits]
        merged = {locale: lists[locale][0] for locale in by_locale}
        question_alone: dict[str, list[ScoredChunk]] = {}
        for locale, found_there in lists.items():
            if len(found_there) > 1:
                merged[locale] = distinct_hits(interleaved(found_there))[:depth]
                question_alone[locale] = found_there[0]
        return interleaved(list(merged.values()))[:depth], merged, question_alone

    def translated_lexical(
        self,
        depth: int,
        scope: ScopeFilter,
        lexical_search: Callable[[str, int, ScopeFilter, Deadline], list[ScoredChunk]],
        lists: LocaleLists,
        deadline: Deadline,
    ) -> dict[str, list[ScoredChunk]]:
        """Each translation searched in each locale list of its language
        alone (in each of the list's tags, merged by score), by list."""
        translated: dict[str, list[ScoredChunk]] = {}
        for locale in lists.locales:
            translation = lists.translations.get(primary_language(locale))
            if translation is not None:
                found = [
                    lexical_search(translation.text, depth, replace(scope, locale=tag), deadline)
                    for tag in lists.groups.tags_of(locale)
                ]
                translated[locale] = merged_by_score(found, depth)
        return translated


def _groups(scope: ScopeFilter, held: tuple[str, ...]) -> LocaleGroups:
    if scope.locale:
        return LocaleGroups(filter_tags=widened_filter(scope.locale, held))
    return LocaleGroups.of(held)


def filter_scopes(scope: ScopeFilter, groups: LocaleGroups) -> list[ScopeFilter]:
    """The scope searched, or one per tag its locale filter was widened to."""
    return [replace(scope, locale=tag) for tag in groups.filter_tags] or [scope]


def _present(vector: list[float] | None) -> list[list[float]]:
    return [] if vector is None else [vector]
