"""Ranking across languages: each locale's pages are ranked apart, then the
locales take turns.

Two pulls keep a question on pages of its own language. A multilingual model
ranks same-language pages above other-language answers (measured with
multilingual-e5-small over a mixed index), and BM25 can only match words of
the question's own language, so under plain RRF an unrelated page of the
question's language collects two votes while the other-language answer can
collect one. The rule, where it can matter (a model that reads every
language, a request whose scope holds several locales and fixes none):

1. the vector channel searches each locale of the request's scope on its own
   (`IndexLocales`; the question translated once per language, its
   translation's vector searched only in locales that take turns when the
   cross-lingual channel can tell beforehand: services.retriever.fan_out);
2. each locale's list is fused with the lexical hits of that locale; in a
   locale of another language than the question's, the question's own words
   cannot match (a lexical miss there is expected, not evidence), so only
   its hits that hold one of the question's exact identifiers count (an
   identifier reads the same in every language), followed by the hits of the
   question's words translated with a bilingual dictionary and searched in
   that locale alone (services.core.analysis.query_translation;
   RAG_CROSS_LANGUAGE_LEXICAL);
3. the fused locale lists take turns (1st document of each, then 2nd of
   each, …; a further chunk of a page already placed takes no turn) in
   the order services.retriever.locale_order decides: the question's
   language first unless another locale's head has clearly more evidence
   (its cosine and lexical agreement, by a margin fitted on the bilingual
   train split); by the best fused score when the question has no
   language, e.g. an identifier alone. The answer's notes say which locale
   led and why.

Measured on the bilingual set with multilingual-e5-small (docs/benchmarks.md)
against plain RRF and against interleaving the vector channel alone; the
answer names the rule in its notes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial

from services.core.analysis import UNDETERMINED, primary_language
from services.core.analysis.query_translation import QueryTranslator, Translation
from services.core.deadline import Deadline
from services.core.models import ScopeFilter, ScoredChunk
from services.retriever.channels import call_as
from services.retriever.fusion import ListFuser
from services.retriever.locale_groups import (
    LocaleGroups,
    in_list,
    merged_by_score,
    widened_filter,
)
from services.retriever.locale_order import HeadEvidence, LocaleOrderRule, OrderDecision
from services.retriever.locale_turns import (
    interleaved,
    interleaved_documents,
    one_place_per_translation,
)
from services.retriever.scope_locales import IndexLocales
from services.retriever.types import Channel, FusedHit
from services.retriever.vector_batching import VectorSearchBatcher
from services.storage.base import VectorQuery, VectorStore


class LocaleBalance(StrEnum):
    INTERLEAVE = "interleave"  # locales ranked apart, taken in turns
    OFF = "off"  # one vector list and one fusion over every locale


class CrossLanguageLexical(StrEnum):
    DICTIONARY = "dictionary"  # the question's words translated, searched per locale
    OFF = "off"  # other-language locales get lexical hits by exact identifiers only


@dataclass(frozen=True)
class LocaleLists:
    """What the channels found per locale when locales are ranked apart: the
    locales (those the request's scope holds), vector hits and lexical hits
    of the translated question per locale, and the translations, one per
    language (zh and zh-CN pages share one), for the debug report. Made by
    the channel fan-out from what its searches returned
    (services.retriever.fan_out); `order` added by fusion."""

    locales: tuple[str, ...] = ()
    # Each locale list's tags (services.retriever.locale_groups: a list is a
    # language; a name not grouped is its own tag).
    groups: LocaleGroups = field(default_factory=LocaleGroups)
    vector: Mapping[str, list[ScoredChunk]] = field(default_factory=dict)
    translated: Mapping[str, list[ScoredChunk]] = field(default_factory=dict)
    translations: Mapping[str, Translation] = field(default_factory=dict)  # by language
    order: OrderDecision | None = None  # which locale led the turns, and why
    # Translations the vector channel did not embed, by language, and why
    # (their locales were sure to wait: ChannelFanOut); the lexical channel
    # searched them all the same.
    not_embedded: Mapping[str, str] = field(default_factory=dict)
    # The question's vector hits alone, per locale whose `vector` list has a
    # translation's merged in (a waiting locale is ranked by these: fuse_locales).
    question_vector: Mapping[str, list[ScoredChunk]] = field(default_factory=dict)

    def translation_notes(self) -> list[str]:
        return [
            f"lexical words translated for {language} pages: {translation.describe()}"
            for language, translation in self.translations.items()
        ]

    def embedding_note(self) -> str:
        """How many texts the vector channel embedded (the debug report)."""
        embedded = [language for language in self.translations if language not in self.not_embedded]
        note = f"query texts embedded: {1 + len(embedded)} (the question"
        note += f", into {', '.join(embedded)})" if embedded else ")"
        skipped = "; ".join(f"into {lang}: {why}" for lang, why in self.not_embedded.items())
        return f"{note}; not embedded: {skipped}" if skipped else note


def other_language(query_language: str, locale: str) -> bool:
    """Whether `locale`'s pages are in another language than a question in
    `query_language` ("" or undetermined: no language, so never)."""
    if query_language in ("", UNDETERMINED):
        return False
    return primary_language(locale) != query_language


def fuse_locales(
    fuser: ListFuser,
    vector_by_locale: Mapping[str, list[ScoredChunk]],
    lexical: Sequence[ScoredChunk],
    query_language: str,
    weights: Mapping[Channel, float] | None,
    translated: Mapping[str, list[ScoredChunk]] | None = None,
    rule: LocaleOrderRule | None = None,
    *,
    cross_lingual: Sequence[ScoredChunk] = (),
    question_vector: Mapping[str, list[ScoredChunk]] | None = None,
) -> tuple[list[FusedHit], OrderDecision]:
    """Steps 2 and 3 of the module docstring (`translated`: lexical hits of
    the translated question per locale; `cross_lingual`: the second vector's
    hits, fused in each locale with that locale's own; `rule`: the turn
    order, by evidence when None): the fused hits and the order's decision,
    for the notes. `question_vector`: the question's vector hits alone, per
    locale whose list in `vector_by_locale` has a translation's merged in; a
    locale that waits is ranked by these, so that its order does not depend
    on whether the translation was embedded at all (services.retriever.fan_out
    leaves it out where the locale is sure to wait: a page token would
    otherwise see another ranking from one page to the next)."""
    fuse = partial(
        _fused_locale, fuser, lexical, query_language, weights, translated or {}, cross_lingual
    )
    fused_lists = {locale: fuse(locale, hits) for locale, hits in vector_by_locale.items()}
    heads = {
        locale: HeadEvidence.of(locale, fused, _in_locale(cross_lingual, locale))
        for locale, fused in fused_lists.items()
    }
    decision = (rule or LocaleOrderRule()).order(heads, query_language)
    for locale in decision.waiting:
        if question_vector and locale in question_vector:
            fused_lists[locale] = fuse(locale, question_vector[locale])
    turns = interleaved_documents([fused_lists[locale] for locale in decision.locales])
    waiting = interleaved_documents([fused_lists[locale] for locale in decision.waiting])
    own_language = partial(_same_language, query_language)
    ordered, moved = one_place_per_translation([*turns, *waiting], own_language)
    return ordered, replace(decision, translations_after=moved)


def _fused_locale(
    fuser: ListFuser,
    lexical: Sequence[ScoredChunk],
    query_language: str,
    weights: Mapping[Channel, float] | None,
    translated: Mapping[str, list[ScoredChunk]],
    cross_lingual: Sequence[ScoredChunk],
    locale: str,
    vector_hits: list[ScoredChunk],
) -> list[FusedHit]:
    """One locale's list: its vector hits, its lexical hits (in another
    language's locale: those by an exact identifier, then the translated
    question's), and its cross-lingual hits."""
    own = not other_language(query_language, locale)
    lexical_hits = [h for h in lexical if in_list(locale, h.chunk.locale) and (own or h.exact)]
    if not own and translated:
        lexical_hits = _merged(lexical_hits, translated.get(locale, []))
    ranked = {Channel.VECTOR: vector_hits, Channel.LEXICAL: lexical_hits}
    if cross_lingual:
        ranked[Channel.CROSS_LINGUAL] = _in_locale(cross_lingual, locale)
    return fuser.fuse(ranked, weights)


def _in_locale(hits: Sequence[ScoredChunk], locale: str) -> list[ScoredChunk]:
    return [hit for hit in hits if in_list(locale, hit.chunk.locale)]


def _same_language(query_language: str, locale: str) -> bool:
    return not other_language(query_language, locale)


def _merged(first: list[ScoredChunk], then: list[ScoredChunk]) -> list[ScoredChunk]:
    """`first`, then the hits of `then` that are not in it, in order."""
    return _distinct([*first, *then])


def balance_note(
    locales: Sequence[str], translated: bool, order: OrderDecision | None = None
) -> str:
    other = "translated by dictionary" if translated else "only in the question's language"
    turns = f"locales in turns, {order.reason}" if order is not None else "locales in turns"
    if order is not None and order.translations_after:
        turns += (
            f"; {order.translations_after} page(s) moved after the other hits: a version "
            "of theirs ranks above"
        )
    return (
        f"ranked each locale apart ({', '.join(locales)}): vector per locale, lexical words "
        f"{other} (identifiers in every locale), {turns}"
    )


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
                merged[locale] = _distinct(interleaved(found_there))[:depth]
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


def _distinct(hits: list[ScoredChunk]) -> list[ScoredChunk]:
    """Each chunk once, where it first appears."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.chunk.chunk_id not in seen:
            seen.add(hit.chunk.chunk_id)
            kept.append(hit)
    return kept
