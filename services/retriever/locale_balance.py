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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial

from services.core.analysis import UNDETERMINED, primary_language
from services.core.analysis.query_translation import Translation
from services.core.models import ScoredChunk
from services.retriever.fusion import ListFuser
from services.retriever.language import NOT_A_LANGUAGE
from services.retriever.locale_groups import LocaleGroups, distinct_hits, in_list
from services.retriever.locale_order import HeadEvidence, LocaleOrderRule, OrderDecision
from services.retriever.locale_turns import interleaved_documents, one_place_per_translation
from services.retriever.types import Channel, FusedHit


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
    `query_language` ("" or undetermined: no language, so never). Pages
    tagged as no language (`und`, `mul`, `zxx`) are in none other: the
    question's words count there (they counted by exact identifiers only,
    and such a page lost to unrelated ones: probe)."""
    if query_language in ("", UNDETERMINED):
        return False
    language = primary_language(locale)
    return language != query_language and language not in NOT_A_LANGUAGE


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
    return distinct_hits([*first, *then])


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
