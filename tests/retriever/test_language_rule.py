"""The language rule on its own: which language, and what the vector channel gets."""

from __future__ import annotations

import pytest

from services.retriever.language import LanguageRule

pytestmark = pytest.mark.unit

ENGLISH_MODEL = LanguageRule(frozenset({"en"}))


def test_a_chinese_question_leaves_the_vector_channel_out() -> None:
    decision = ENGLISH_MODEL.decide("上传的文件会保留多久")
    assert (decision.language, decision.detected, decision.skip_vector) == ("zh", True, True)
    assert "reads en, not zh" in decision.note


def test_english_and_identifier_only_queries_keep_it() -> None:
    for query in ("how do I rotate an API key", "429", "chunkSize=800"):
        decision = ENGLISH_MODEL.decide(query)
        assert decision.vector_weight == 1.0 and decision.note == "", query


def test_the_caller_can_name_the_language() -> None:
    decision = ENGLISH_MODEL.decide("限流", requested="en-US")
    assert (decision.language, decision.detected, decision.skip_vector) == ("en", False, False)


def test_a_scope_locale_that_names_an_unread_language_counts() -> None:
    assert ENGLISH_MODEL.decide("rate limits", scope_locale="zh-CN").skip_vector
    for locale in ("x-default", "und", "en-GB", ""):
        assert not ENGLISH_MODEL.decide("rate limits", scope_locale=locale).skip_vector, locale


def test_a_weight_instead_of_leaving_the_channel_out() -> None:
    rule = LanguageRule(frozenset({"en"}), unread_weight=0.25)
    decision = rule.decide("限流是什么")
    assert decision.vector_weight == 0.25 and "weighted ×0.25" in decision.note


def test_explicit_channels_are_respected() -> None:
    alone = ENGLISH_MODEL.decide("限流是什么", hybrid=False)
    assert alone.vector_weight == 1.0 and "kept as requested" in alone.note
    without = ENGLISH_MODEL.decide("限流是什么", vector_requested=False, hybrid=False)
    assert without.note == ""


def test_a_multilingual_model_reads_everything() -> None:
    rule = LanguageRule(frozenset({"*"}))
    assert rule.decide("上传的文件会保留多久").vector_weight == 1.0
