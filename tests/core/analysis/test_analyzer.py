"""The shared lexical analysis: words, CJK segmentation, mixed text, plans."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.analysis import CjkMode, TextAnalyzer
from services.core.analysis.analyzer import CACHED_RUN_CHARS, _segment_cached

pytestmark = pytest.mark.unit

WORDS = TextAnalyzer(CjkMode.WORDS)
BIGRAMS = TextAnalyzer(CjkMode.BIGRAMS)


def terms(analyzer: TextAnalyzer, text: str) -> list[str]:
    return analyzer.terms(text).split()


def test_english_words_are_split_lowercased_and_stemmed_like_en_stem() -> None:
    assert terms(WORDS, "Configuring RETRIES for the Embeddings API") == [
        "configur", "retri", "for", "the", "embed", "api",
    ]  # fmt: skip
    # Split at every non-alphanumeric character, as tantivy's simple tokenizer.
    assert terms(WORDS, "text-embedding-v4 chunkSize=800 max_tokens") == [
        "text", "embed", "v4", "chunksiz", "800", "max", "token",
    ]  # fmt: skip


def test_words_over_40_bytes_are_dropped_and_full_width_is_folded() -> None:
    assert terms(WORDS, "a" * 41 + " ok") == ["ok"]
    assert terms(WORDS, "ｃｈｕｎｋ ８００") == ["chunk", "800"]


def test_combining_marks_stay_inside_their_words() -> None:
    assert terms(WORDS, "हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert terms(WORDS, "cafe\u0301") == terms(WORDS, "café")  # decomposed = composed


def test_half_width_kana_and_compatibility_ideographs_fold() -> None:
    assert terms(WORDS, "ﾃﾞｰﾀﾍﾞｰｽ") == terms(WORDS, "データベース")
    assert terms(WORDS, "\uf900") == terms(WORDS, "豈")


def test_chinese_is_segmented_into_words_with_search_mode_parts() -> None:
    assert terms(WORDS, "如何设置分块大小") == ["如何", "设置", "分块", "大小"]
    assert {"中华", "人民", "共和国", "中华人民共和国"} <= set(terms(WORDS, "中华人民共和国"))


def test_bigram_mode_and_japanese_korean_use_overlapping_pairs() -> None:
    assert terms(BIGRAMS, "分块大小") == ["分块", "块大", "大小"]
    assert terms(WORDS, "レート制限") == ["レー", "ート", "ト制", "制限"]
    assert terms(WORDS, "요청 한도") == ["요청", "한도"]
    assert terms(BIGRAMS, "块") == ["块"]


def test_mixed_text_keeps_both_scripts_with_offsets() -> None:
    text = "将 chunkSize 设置为800字符"
    tokens = WORDS.tokens(text)
    assert [text[t.start : t.end] for t in tokens] == [
        "将",
        "chunkSize",
        "设置",
        "为",
        "800",
        "字符",
    ]
    assert [t.cjk for t in tokens] == [True, False, True, True, False, True]


def test_a_plan_has_terms_phrases_and_identifiers() -> None:
    plan = WORDS.plan("how to set chunkSize=800 的默认值")
    assert plan.terms == ("how", "set", "chunksiz", "800", "默认", "默认值")
    assert plan.phrases == (((0, "chunksiz"), (1, "800")),)
    assert plan.identifiers == ("chunksize=800",)


def test_stopwords_leave_a_query_unless_nothing_else_is_left() -> None:
    assert WORDS.plan("what is the rate limit").terms == ("what", "rate", "limit")
    assert WORDS.plan("to be or not").terms == ("to", "be", "or", "not")
    assert WORDS.plan("请问怎么结算").terms == ("结算",)
    assert WORDS.plan("是什么").terms == ("是", "什么")


def test_both_mode_indexes_words_and_bigrams() -> None:
    both = TextAnalyzer(CjkMode.BOTH)
    assert terms(both, "分块大小") == ["分块", "大小", "分块", "块大", "大小"]


def test_phrases_are_bounded() -> None:
    plan = WORDS.plan("a." * 500)
    assert all(len(phrase) <= 16 for phrase in plan.phrases)


def test_the_analysis_version_names_the_cjk_mode() -> None:
    assert WORDS.version != BIGRAMS.version
    assert WORDS.version.endswith("cjk=words")


@given(st.text(max_size=300))
def test_terms_are_single_tokens_and_spans_are_exact(text: str) -> None:
    for token in WORDS.tokens(text):
        assert token.term and not any(ch.isspace() for ch in token.term)
        assert 0 <= token.start < token.end <= len(text)
    assert WORDS.terms(text).split() == [t.term for t in WORDS.tokens(text)]


def test_only_short_chinese_runs_are_cached_and_long_ones_segment_the_same() -> None:
    """A distinct long question must not leave its segmentation behind
    (probe 3: ~180 KB each, up to a 12 GB cache)."""
    long_run = "签名密钥每九十天轮换一次" * 20  # one run of 240 characters
    assert len(long_run) > CACHED_RUN_CHARS
    _segment_cached.cache_clear()  # a cache only: clearing it changes no result
    segmented = terms(WORDS, long_run)
    assert _segment_cached.cache_info().currsize == 0
    assert segmented == terms(WORDS, "签名密钥每九十天轮换一次") * 20
    assert _segment_cached.cache_info().currsize == 1  # a question's short run is cached
