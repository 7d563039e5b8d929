"""The lists a request ranks apart are languages, not locale tags (unit)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.core.models import ScoredChunk
from services.retriever.locale_groups import (
    MAX_LANGUAGES_APART,
    MAX_TAGS_APART,
    LocaleGroups,
    in_list,
    merged_by_score,
    widened_filter,
)
from services.retriever.locale_order import LocaleOrderRule
from services.retriever.translation_deferral import needed_translations
from tests.retriever.factories import scored

pytestmark = pytest.mark.unit


def _hit(chunk_id: str, locale: str, score: float, exact: tuple[str, ...] = ()) -> ScoredChunk:
    found = scored(chunk_id, score)
    return replace(found, chunk=replace(found.chunk, locale=locale), exact=exact)


def test_one_language_under_several_tags_is_not_ranked_apart() -> None:
    assert LocaleGroups.of(["en", "en-US"]).names == ()
    assert LocaleGroups.of(["zh-CN", "zh", "zh-Hant"]).names == ()
    assert LocaleGroups.of(["en", ""]).names == ()
    assert LocaleGroups.of([]).names == ()


def test_a_list_is_named_by_its_tag_or_by_its_language_when_it_has_several() -> None:
    groups = LocaleGroups.of(["zh-CN", "en-US", "en"])
    assert groups.names == ("en", "zh-CN")
    assert groups.tags_of("en") == ("en", "en-US")
    assert groups.tags_of("zh-CN") == ("zh-CN",)
    assert groups.name_of("en-US") == "en"
    assert groups.name_of("zh-CN") == "zh-CN"
    assert groups.name_of("fr") is None
    single = LocaleGroups.of(["en-US", "zh-CN"])
    assert single.names == ("en-US", "zh-CN")  # one tag per language: named as before
    assert LocaleGroups().tags_of("zh-CN") == ("zh-CN",)  # a list made without groups


def test_a_page_belongs_to_the_list_of_its_language() -> None:
    assert in_list("en", "en-US") and in_list("en-US", "en") and in_list("zh-CN", "zh")
    assert not in_list("en", "zh-CN")


def test_lists_of_one_query_merge_by_score_each_chunk_once() -> None:
    en = [_hit("a", "en", 0.9), _hit("b", "en", 0.6)]
    us = [_hit("c", "en-US", 0.7), _hit("d", "en-US", 0.5)]
    assert [h.chunk.chunk_id for h in merged_by_score([en, us], 10)] == ["a", "c", "b", "d"]
    assert [h.chunk.chunk_id for h in merged_by_score([en, us], 2)] == ["a", "c"]
    assert merged_by_score([en], 1) == en[:1]


def test_the_hit_holding_the_query_s_identifiers_keeps_the_lead_in_a_merged_lexical_list() -> None:
    en = [_hit("held", "en", 3.0, exact=("e1042",)), _hit("b", "en", 5.0)]
    us = [_hit("c", "en-US", 4.0)]
    assert [h.chunk.chunk_id for h in merged_by_score([en, us], 10)] == ["held", "b", "c"]


def test_a_grouped_list_reads_its_best_cross_lingual_cosine_from_any_of_its_tags() -> None:
    """The zh list (zh + zh-CN) is far below English in the cross-lingual
    channel, read from its zh-CN page: it is sure to wait, and its
    translation is not needed."""
    hits = [_hit("en-1", "en", 0.8), _hit("zh-1", "zh-CN", 0.2)]
    rule = LocaleOrderRule()
    needed = needed_translations(rule, "en", ("en", "zh"), {"zh": "译文"}, hits)
    assert needed == {}
    near = [_hit("en-1", "en", 0.6), _hit("zh-1", "zh-CN", 0.55)]
    assert needed_translations(rule, "en", ("en", "zh"), {"zh": "译文"}, near) == {"zh": "译文"}


def test_a_locale_filter_no_page_carries_selects_its_language_s_wider_or_narrower_tags() -> None:
    held = ["en", "zh-CN", "zh-Hans", "zh-TW"]
    assert widened_filter("zh-CN", held) == ()  # held: searched as given
    assert widened_filter("zh", held) == ("zh-CN", "zh-Hans", "zh-TW")
    assert widened_filter("zh-CN", ["en", "zh"]) == ("zh",)
    assert widened_filter("zh-CN", ["zh-TW", "zh-Hans"]) == ()  # another region or script
    assert widened_filter("en-US", ["en", "en-GB"]) == ("en",)
    assert widened_filter("fr", held) == ()
    assert widened_filter("", held) == ()


def test_a_scope_of_too_many_languages_is_ranked_as_one_list() -> None:
    """A writer of one scope may upsert pages under a thousand tags: ranked
    apart, each was a search and a fusion per Retrieve (a probe: 1,500
    languages, 4.8 s of fusion on the event loop). Over the bound: one list,
    and a note says why. A locale filter widened to its language's tags is
    bounded the same way."""
    many = [f"en-x-t{i:04d}" for i in range(1000)]
    crowded = LocaleGroups.of([*many, "zh-CN"])
    assert crowded.names == () and "2 languages under 1001 tags" in crowded.crowded_note()
    languages = [f"{a}{b}" for a in "bcdfg" for b in "aeiou"][: MAX_LANGUAGES_APART + 1]
    assert LocaleGroups.of(languages).names == ()
    assert len(LocaleGroups.of(languages[:MAX_LANGUAGES_APART]).names) == MAX_LANGUAGES_APART
    assert LocaleGroups.of(languages[:MAX_LANGUAGES_APART]).crowded_note() == ""
    assert len(widened_filter("en", many)) == MAX_TAGS_APART
