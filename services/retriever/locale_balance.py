"""Ranking across languages: each locale's pages are ranked apart, then the
locales take turns.

Two pulls keep a question on pages of its own language. A multilingual model
ranks same-language pages above other-language answers (measured with
multilingual-e5-small over a mixed index), and BM25 can only match words of
the question's own language, so under plain RRF an unrelated page of the
question's language collects two votes while the other-language answer can
collect one. The rule, where it can matter (a model that reads every
language, an index of several locales, a request that fixes none):

1. the vector channel searches each locale of the index on its own;
2. each locale's list is fused with the lexical hits of that locale; in a
   locale of another language than the question's, the question's own words
   cannot match (a lexical miss there is expected, not evidence), so only
   its hits that hold one of the question's exact identifiers count (an
   identifier reads the same in every language), followed by the hits of the
   question's words translated with a bilingual dictionary and searched in
   that locale alone (services.core.analysis.query_translation;
   RAG_CROSS_LANGUAGE_LEXICAL);
3. the fused locale lists take turns (1st of each, then 2nd of each, …) in
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

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TypeVar

from services.core.analysis import UNDETERMINED, primary_language
from services.core.analysis.query_translation import QueryTranslator, Translation
from services.core.deadline import Deadline
from services.core.models import ScopeFilter, ScoredChunk
from services.retriever.channels import call_as
from services.retriever.fusion import ListFuser
from services.retriever.locale_order import HeadEvidence, LocaleOrderRule, OrderDecision
from services.retriever.types import Channel, FusedHit
from services.retriever.vector_batching import VectorSearchBatcher
from services.storage.base import VectorQuery, VectorStore
from services.storage.manifest import Manifest

T = TypeVar("T")


class LocaleBalance(StrEnum):
    INTERLEAVE = "interleave"  # locales ranked apart, taken in turns
    OFF = "off"  # one vector list and one fusion over every locale


class CrossLanguageLexical(StrEnum):
    DICTIONARY = "dictionary"  # the question's words translated, searched per locale
    OFF = "off"  # other-language locales get lexical hits by exact identifiers only


@dataclass
class LocaleLists:
    """What the channels found per locale when locales are ranked apart:
    vector hits, lexical hits of the translated question, and the
    translations themselves (for the debug report)."""

    vector: dict[str, list[ScoredChunk]] = field(default_factory=dict)
    translated: dict[str, list[ScoredChunk]] = field(default_factory=dict)
    translations: dict[str, Translation] = field(default_factory=dict)
    order: OrderDecision | None = None  # which locale led the turns, and why

    def translation_notes(self) -> list[str]:
        return [
            f"lexical words translated for {locale} pages: {translation.describe()}"
            for locale, translation in self.translations.items()
        ]


def other_language(query_language: str, locale: str) -> bool:
    """Whether `locale`'s pages are in another language than a question in
    `query_language` ("" or undetermined: no language, so never)."""
    if query_language in ("", UNDETERMINED):
        return False
    return primary_language(locale) != query_language


class IndexLocales:
    """A cached reading of the locales the index holds (from the manifest)."""

    def __init__(
        self,
        read: Callable[[], Iterable[str]],
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._refresh_s, self._clock = read, refresh_s, clock
        self._lock = threading.Lock()
        self._value: tuple[str, ...] | None = None
        self._read_at = 0.0

    @classmethod
    def of(cls, manifest: Manifest, refresh_s: float = 5.0) -> IndexLocales:
        return cls(lambda: manifest.chunk_counts_by_locale().keys(), refresh_s)

    def current(self) -> tuple[str, ...]:
        """The locales, read again when the last reading is older than
        `refresh_s`; a failed re-read keeps the last value (or none)."""
        with self._lock:
            if self._value is None or self._clock() - self._read_at >= self._refresh_s:
                try:
                    self._value = tuple(sorted(set(self._read()) - {""}))
                except Exception:
                    self._value = self._value or ()
                self._read_at = self._clock()
            return self._value


def interleaved(lists: Sequence[list[T]]) -> list[T]:
    """Each list's 1st, then each list's 2nd, …; a list that runs out is skipped."""
    turns = itertools.zip_longest(*lists)
    return [hit for turn in turns for hit in turn if hit is not None]


def fuse_per_locale(
    fuser: ListFuser,
    vector_by_locale: Mapping[str, list[ScoredChunk]],
    lexical: Sequence[ScoredChunk],
    query_language: str,
    weights: Mapping[Channel, float] | None,
    translated: Mapping[str, list[ScoredChunk]] | None = None,
    rule: LocaleOrderRule | None = None,
    decided: LocaleLists | None = None,
) -> list[FusedHit]:
    """Steps 2 and 3 of the module docstring (`translated`: lexical hits of
    the translated question per locale; `rule`: the turn order, by evidence
    when None; `decided.order` gets the decision, for the notes)."""
    fused_lists: dict[str, list[FusedHit]] = {}
    for locale, vector_hits in vector_by_locale.items():
        own = not other_language(query_language, locale)
        lexical_hits = [h for h in lexical if h.chunk.locale == locale and (own or h.exact)]
        if not own and translated:
            lexical_hits = _merged(lexical_hits, translated.get(locale, []))
        ranked = {Channel.VECTOR: vector_hits, Channel.LEXICAL: lexical_hits}
        fused_lists[locale] = fuser.fuse(ranked, weights)
    heads = {locale: HeadEvidence.of(locale, hits) for locale, hits in fused_lists.items()}
    decision = (rule or LocaleOrderRule()).order(heads, query_language)
    if decided is not None:
        decided.order = decision
    return interleaved([fused_lists[locale] for locale in decision.locales])


def _merged(first: list[ScoredChunk], then: list[ScoredChunk]) -> list[ScoredChunk]:
    """`first`, then the hits of `then` that are not in it, in order."""
    return _distinct([*first, *then])


def balance_note(
    locales: Sequence[str], translated: bool, order: OrderDecision | None = None
) -> str:
    other = "translated by dictionary" if translated else "only in the question's language"
    turns = f"locales in turns, {order.reason}" if order is not None else "locales in turns"
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

    def locales_to_balance(self, scope: ScopeFilter) -> tuple[str, ...]:
        if not self.enabled or self.locales is None or scope.locale:
            return ()
        locales = self.locales.current()
        return locales if len(locales) > 1 else ()

    def translate(self, query: str, language: str, scope: ScopeFilter, lists: LocaleLists) -> None:
        """The question in each other-language locale's language
        (`lists.translations`), when locales are ranked apart."""
        if self.translator is None:
            return
        for locale in self.locales_to_balance(scope):
            if other_language(language, locale):
                target = primary_language(locale)
                translation = self.translator.translate(query, language, target)
                if translation is not None:
                    lists.translations[locale] = translation

    def vector(
        self,
        vectors: list[list[float]],
        depth: int,
        scope: ScopeFilter,
        lists: LocaleLists,
        deadline: Deadline | None = None,
    ) -> list[ScoredChunk]:
        """One search, or one per locale (`lists.vector` gets them; the
        channel's own list takes them in turns). `vectors`: the question's,
        then one per translation in `lists.translations`; in a locale with a
        translation, the question's and the translation's hits take turns."""
        locales = self.locales_to_balance(scope)
        if not locales:
            only = [VectorQuery(vectors[0], depth, scope)]
            return call_as("vector", self.searches.search_many, only, deadline)[0]
        translated = dict(zip(lists.translations, vectors[1:], strict=True))
        # Every locale's searches (the question's, and its translation's
        # where there is one) as one store call: one pass over the segments.
        queries = [
            VectorQuery(vector, depth, replace(scope, locale=locale))
            for locale in locales
            for vector in (vectors[0], *([translated[locale]] if locale in translated else []))
        ]
        answers = iter(call_as("vector", self.searches.search_many, queries, deadline))
        for locale in locales:
            hits = next(answers)
            if locale in translated:
                hits = _distinct(interleaved([hits, next(answers)]))[:depth]
            lists.vector[locale] = hits
        return interleaved(list(lists.vector.values()))[:depth]

    def translated_lexical(
        self,
        depth: int,
        scope: ScopeFilter,
        lexical_search: Callable[[str, int, ScopeFilter, Deadline | None], list[ScoredChunk]],
        lists: LocaleLists,
        deadline: Deadline | None = None,
    ) -> None:
        """Each translation searched in its locale alone (`lists.translated`)."""
        for locale, translation in lists.translations.items():
            search = replace(scope, locale=locale)
            lists.translated[locale] = lexical_search(translation.text, depth, search, deadline)


def _distinct(hits: list[ScoredChunk]) -> list[ScoredChunk]:
    """Each chunk once, where it first appears."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.chunk.chunk_id not in seen:
            seen.add(hit.chunk.chunk_id)
            kept.append(hit)
    return kept
