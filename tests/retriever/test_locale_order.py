"""Which locale leads the turns (services.retriever.locale_order), on
hand-made lists: FAKE per-locale channel lists standing in for the stores'
answers, so each piece of evidence can be set on its own (unit)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.analysis.query_shape import query_shape
from services.core.models import ScoredChunk
from services.core.translation_links import TRANSLATIONS_KEY
from services.retriever.fusion import RrfFuser
from services.retriever.locale_balance import balance_note, fuse_locales
from services.retriever.locale_order import (
    LEXICAL_AGREEMENT,
    HeadEvidence,
    LocaleOrder,
    LocaleOrderRule,
)
from services.retriever.requests import RetrievalConfig
from services.retriever.types import Channel
from tests.retriever.factories import scored

pytestmark = pytest.mark.unit


def _hit(chunk_id: str, locale: str, score: float = 1.0) -> ScoredChunk:
    """A FAKE store hit: `score` is its cosine (vector) or BM25 (lexical)."""
    hit = scored(chunk_id, score)
    return replace(hit, chunk=replace(hit.chunk, locale=locale))


def test_another_language_leads_only_with_more_evidence_than_the_margin() -> None:
    rule = LocaleOrderRule(margin=0.02)
    own = HeadEvidence("en", cosine=0.80, lexical=True)  # evidence 0.80 + agreement
    ahead = HeadEvidence("zh-CN", cosine=0.86, lexical=True)
    close = HeadEvidence("zh-CN", cosine=0.81, lexical=True)
    led = rule.order({"en": own, "zh-CN": ahead}, "en")
    assert led.locales == ("zh-CN", "en") and led.other_language_leads
    assert led.reason.startswith("zh-CN leads (another language) by evidence")
    assert "zh-CN head cosine 0.860 + lexical vs en head cosine 0.800 + lexical" in led.reason
    kept = rule.order({"en": own, "zh-CN": close}, "en")
    assert kept.locales == ("en", "zh-CN") and not kept.other_language_leads
    assert kept.reason.startswith("en leads (question's language)")
    # A negative margin lets another language lead with less evidence: it still leads.
    eager = LocaleOrderRule(margin=-0.1).order({"en": own, "zh-CN": close}, "en")
    assert eager.locales == ("zh-CN", "en") and eager.other_language_leads


def test_a_page_only_the_question_s_words_found_keeps_its_language_first() -> None:
    """The English head was found by the lexical channel alone (a rare word
    typed on its own): it has no cosine, and 0 must not read as no evidence,
    or any Chinese page the vector search returns would lead."""
    rule = LocaleOrderRule(margin=0.04)
    words_only = HeadEvidence("en", cosine=0.0, lexical=True, vector=False)
    vector_head = HeadEvidence("zh", cosine=0.79, lexical=False)
    kept = rule.order({"en": words_only, "zh": vector_head}, "en")
    assert kept.locales == ("en", "zh") and not kept.other_language_leads
    assert "its words found a page the vector search did not rank" in kept.reason
    # With a cosine to weigh, the evidence rule decides as before.
    weighed = rule.order(
        {"en": replace(words_only, cosine=0.70, vector=True), "zh": vector_head}, "en"
    )
    assert weighed.locales == ("zh", "en")


def test_lexical_agreement_counts_as_evidence() -> None:
    rule = LocaleOrderRule(margin=0.0)
    vector_only = HeadEvidence("en", cosine=0.84, lexical=False)
    both = HeadEvidence("zh-CN", cosine=0.84 - LEXICAL_AGREEMENT / 2, lexical=True)
    assert rule.order({"en": vector_only, "zh-CN": both}, "en").locales[0] == "zh-CN"
    alone = replace(both, lexical=False)
    assert rule.order({"en": vector_only, "zh-CN": alone}, "en").locales[0] == "en"


def test_question_first_and_questions_without_language_keep_the_former_rule() -> None:
    heads = {
        "en": HeadEvidence("en", 0.70, False, fused_score=0.01),
        "zh-CN": HeadEvidence("zh-CN", 0.95, True, fused_score=0.03),
    }
    former = LocaleOrderRule(LocaleOrder.QUESTION_FIRST)
    assert former.order(heads, "en").locales == ("en", "zh-CN")
    assert LocaleOrderRule().order(heads, "und").locales == ("zh-CN", "en")  # best fused score
    assert "best fused score" in LocaleOrderRule().order(heads, "").reason
    assert LocaleOrderRule().order({}, "en").locales == ()


def test_fused_locale_lists_are_taken_in_the_decided_order_and_the_notes_say_why() -> None:
    vector = {  # FAKE per-locale vector answers (cosines)
        "en": [_hit("en-near", "en", 0.81), _hit("en-far", "en", 0.79)],
        "zh-CN": [_hit("zh-answer", "zh-CN", 0.86), _hit("zh-other", "zh-CN", 0.80)],
    }
    lexical = [_hit("en-near", "en", 7.0)]  # the question's words match an English page
    translated = {"zh-CN": [_hit("zh-answer", "zh-CN", 5.0)]}  # its translation, the answer
    rule = LocaleOrderRule(margin=0.02)
    fused, order = fuse_locales(RrfFuser(), vector, lexical, "en", None, translated, rule)
    assert [h.chunk.chunk_id for h in fused] == ["zh-answer", "en-near", "zh-other", "en-far"]
    assert order.other_language_leads
    note = balance_note(["en", "zh-CN"], True, order)
    assert "locales in turns, zh-CN leads (another language) by evidence" in note
    former = LocaleOrderRule(LocaleOrder.QUESTION_FIRST)
    fused, _ = fuse_locales(RrfFuser(), vector, lexical, "en", None, translated, former)
    assert [h.chunk.chunk_id for h in fused][:2] == ["en-near", "zh-answer"]


def test_with_a_cross_lingual_channel_its_best_cosine_per_locale_decides() -> None:
    """Each locale's best cosine in the cross-lingual channel (a model
    trained on translations) decides, with its own margin; the first
    model's cosines are not read then."""
    rule = LocaleOrderRule(margin=0.04, cross_lingual_margin=-0.05)
    own = HeadEvidence("zh-CN", cosine=0.89, lexical=True, cross_lingual=0.52)
    close = HeadEvidence("en", cosine=0.83, lexical=True, cross_lingual=0.48)  # gap -0.04
    far = replace(close, cross_lingual=0.46)  # gap -0.06
    led = rule.order({"zh-CN": own, "en": close}, "zh")
    assert led.locales == ("en", "zh-CN") and led.other_language_leads
    assert "en best cross-lingual cosine 0.480 vs zh-CN best cross-lingual cosine 0.520" in (
        led.reason
    )
    assert "margin -0.05" in led.reason
    kept = rule.order({"zh-CN": own, "en": far}, "zh")
    assert kept.locales == ("zh-CN", "en") and not kept.other_language_leads
    # A locale without a reading in that channel: the first model's rule decides.
    mixed = rule.order({"zh-CN": own, "en": replace(close, cross_lingual=None)}, "zh")
    assert mixed.locales == ("zh-CN", "en") and "head cosine" in mixed.reason


def test_fused_lists_read_each_locale_s_best_cross_lingual_hit() -> None:
    vector = {  # FAKE per-locale vector answers (e5 cosines: the question's language ahead)
        "zh-CN": [_hit("zh-near", "zh-CN", 0.89)],
        "en": [_hit("en-answer", "en", 0.84)],
    }
    # FAKE cross-lingual answer, one search over every locale, best first.
    crossing = [_hit("zh-near", "zh-CN", 0.50), _hit("en-answer", "en", 0.49)]
    rule = LocaleOrderRule(cross_lingual_margin=-0.02)
    fused, order = fuse_locales(
        RrfFuser(), vector, [], "zh", None, None, rule, cross_lingual=crossing
    )
    assert [h.chunk.chunk_id for h in fused] == ["en-answer", "zh-near"]
    assert order.other_language_leads and "cross-lingual cosine 0.490" in order.reason
    without, _ = fuse_locales(RrfFuser(), vector, [], "zh", None, None, rule)
    assert [h.chunk.chunk_id for h in without] == ["zh-near", "en-answer"]


def test_another_language_leads_only_with_a_page_the_question_s_language_lacks() -> None:
    """The other language's head would lead by evidence, but its page lists
    a translation in the question's language: the reader's version exists,
    so the question's language keeps the lead, and the reason says why."""
    rule = LocaleOrderRule(cross_lingual_margin=-0.05)
    own = HeadEvidence("zh-CN", cosine=0.89, lexical=True, cross_lingual=0.26)
    lone = HeadEvidence("en", cosine=0.83, lexical=True, cross_lingual=0.25)
    twinned = replace(lone, twins=frozenset({"zh"}))
    assert rule.order({"zh-CN": own, "en": lone}, "zh").locales == ("en", "zh-CN")
    kept = rule.order({"zh-CN": own, "en": twinned}, "zh")
    assert kept.locales == ("zh-CN", "en") and not kept.other_language_leads
    assert kept.reason.startswith(
        "zh-CN leads (question's language): en led by evidence, but its page exists in zh too"
    )
    # A translation into a third language is no reader's version.
    other_twin = replace(lone, twins=frozenset({"ja"}))
    assert rule.order({"zh-CN": own, "en": other_twin}, "zh").other_language_leads


def test_the_head_s_translations_come_from_its_page_metadata() -> None:
    fused = RrfFuser().fuse({Channel.VECTOR: [_hit("en-page", "en", 0.8)]}, None)
    chunk = fused[0].chunk
    metadata = {TRANSLATIONS_KEY: '[{"locale": "zh-CN", "doc_id": "zh-CN/page.md", "url": "/zh"}]'}
    fused[0] = replace(fused[0], chunk=replace(chunk, metadata=metadata))
    assert HeadEvidence.of("en", fused).twins == frozenset({"zh"})
    assert HeadEvidence.of("en", []).twins == frozenset()


def test_only_a_query_that_reads_as_a_question_may_cross_by_evidence() -> None:
    # The margins were fitted on questions; a few remembered words keep their
    # own language first (known-item set: words-1 hit@1 0.33 -> 0.53).
    rules = RetrievalConfig().order_rules()
    question = rules.for_shape(query_shape("how do I keep the two stores in step"))
    keywords = rules.for_shape(query_shape("repack stderr"))
    heads = {
        "en": HeadEvidence("en", 0.80, False, cross_lingual=0.30),
        "zh-CN": HeadEvidence("zh-CN", 0.85, False, cross_lingual=0.40),
    }
    assert question.order(heads, "en").locales == ("zh-CN", "en")
    assert keywords.order(heads, "en").locales == ("en", "zh-CN")
    former = RetrievalConfig(locale_order=LocaleOrder.QUESTION_FIRST).order_rules()
    assert former.for_shape(query_shape("how do I keep the two stores in step")).order(
        heads, "en"
    ).locales == ("en", "zh-CN")


_LOCALES = ("en", "en-GB", "zh", "zh-CN", "ja")


@settings(max_examples=300, deadline=None)
@given(
    bests=st.lists(
        st.one_of(st.none(), st.floats(-1, 1)), min_size=len(_LOCALES), max_size=len(_LOCALES)
    ),
    cosines=st.lists(st.floats(0, 1), min_size=len(_LOCALES), max_size=len(_LOCALES)),
    twins=st.lists(
        st.frozensets(st.sampled_from(("en", "zh", "ja"))),
        min_size=len(_LOCALES),
        max_size=len(_LOCALES),
    ),
    held=st.integers(2, len(_LOCALES)),
    language=st.sampled_from(("en", "zh", "", "und")),
    gap=st.sampled_from((0.05, 0.2, 2.0)),
)
def test_a_locale_sure_to_wait_from_the_cross_lingual_channel_alone_waits(
    bests: list[float | None],
    cosines: list[float],
    twins: list[frozenset[str]],
    held: int,
    language: str,
    gap: float,
) -> None:
    """Whatever the vector searches then find (cosines, lexical agreement,
    the head page's translations), a locale `sure_to_wait` names waits:
    its translation need not be embedded (services.retriever.fan_out)."""
    rule = LocaleOrderRule(wait_gap=gap)
    names = _LOCALES[:held]
    heads = {
        name: HeadEvidence(name, cosine, cosine > 0.5, cross_lingual=best, twins=twin)
        for name, best, cosine, twin in zip(names, bests, cosines, twins, strict=False)
    }
    sure = rule.sure_to_wait({name: heads[name].cross_lingual for name in names}, language)
    assert sure <= set(rule.order(heads, language).waiting)


def test_a_locale_far_below_the_lead_in_the_cross_lingual_channel_waits() -> None:
    """An English question over English pages and unrelated Chinese ones:
    the Chinese locale's best cross-lingual cosine is far below English's,
    so its list follows the English one instead of taking rank 2; within
    the gap it keeps its turns; gap 2 never waits."""
    rule = LocaleOrderRule(cross_lingual_margin=-0.08, wait_gap=0.2)
    lead = HeadEvidence("en", cosine=0.86, lexical=True, cross_lingual=0.53)
    unrelated = HeadEvidence("zh", cosine=0.82, lexical=True, cross_lingual=0.16)
    decision = rule.order({"en": lead, "zh": unrelated}, "en")
    assert decision.locales == ("en",) and decision.waiting == ("zh",)
    assert "zh after en's list, best cross-lingual cosine more than 0.2 below en's" in (
        decision.reason
    )
    near = replace(unrelated, cross_lingual=0.34)  # 0.19 below: keeps its turns
    assert rule.order({"en": lead, "zh": near}, "en").waiting == ()
    never = replace(rule, wait_gap=2.0)
    assert never.order({"en": lead, "zh": unrelated}, "en").locales == ("en", "zh")
    # Without a cross-lingual reading (no such channel) nothing waits.
    bare = {"en": replace(lead, cross_lingual=None), "zh": replace(unrelated, cross_lingual=None)}
    assert rule.order(bare, "en").waiting == ()


def test_a_waiting_locale_s_hits_follow_every_hit_of_the_others() -> None:
    vector = {  # FAKE per-locale vector answers
        "en": [_hit("en-1", "en", 0.86), _hit("en-2", "en", 0.84), _hit("en-3", "en", 0.83)],
        "zh": [_hit("zh-1", "zh", 0.85), _hit("zh-2", "zh", 0.84)],
    }
    # FAKE cross-lingual answer: the Chinese pages say nothing near the question.
    crossing = [_hit("en-1", "en", 0.55), _hit("zh-1", "zh", 0.15)]
    rule = LocaleOrderRule(wait_gap=0.2)
    fused, order = fuse_locales(
        RrfFuser(), vector, [], "en", None, None, rule, cross_lingual=crossing
    )
    assert [h.chunk.chunk_id for h in fused] == ["en-1", "en-2", "en-3", "zh-1", "zh-2"]
    assert order.waiting == ("zh",)
    turns, _ = fuse_locales(
        RrfFuser(),
        vector,
        [],
        "en",
        None,
        None,
        replace(rule, wait_gap=0.5),
        cross_lingual=crossing,
    )
    assert [h.chunk.chunk_id for h in turns][:3] == ["en-1", "zh-1", "en-2"]


def test_a_locale_far_below_the_leader_is_sure_to_wait_before_any_vector_search() -> None:
    rule = LocaleOrderRule()
    assert rule.sure_to_wait({"en": 0.7, "zh": 0.2}, "en") == {"zh"}
    assert rule.sure_to_wait({"en": 0.6, "zh": 0.45}, "en") == set()  # takes turns
    assert rule.sure_to_wait({"en": 0.2, "zh": 0.7}, "en") == set()  # zh may lead
    assert rule.sure_to_wait({"en": 0.7, "zh": None}, "en") == set()  # no reading for zh
    assert LocaleOrderRule(wait_gap=2).sure_to_wait({"en": 0.7, "zh": 0.2}, "en") == set()


def test_the_note_says_why_a_list_leads_when_none_is_in_the_question_s_language() -> None:
    """An English question over French and German pages: the note said
    "fr leads: question's language" (probe)."""
    heads = {
        "de": HeadEvidence("de", cosine=0.7, lexical=False, fused_score=0.02),
        "fr": HeadEvidence("fr", cosine=0.8, lexical=True, fused_score=0.03),
    }
    decision = LocaleOrderRule().order(heads, "en")
    assert decision.reason == "fr leads: best fused score, none in the question's"
