"""The script-based query-language rule and match spans."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.analysis import TextAnalyzer, detect_language, match_spans
from services.core.analysis.scripts import CJK_RUN, primary_language

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("query", "language"),
    [
        ("how do I rotate an API key", "en"),
        ("上传的文件会保留多久？", "zh"),
        ("chunkSize 的默认值是多少", "zh"),  # identifiers are language-neutral
        ("如何用 CLI 做 dry run", "zh"),  # 5 Han characters against 3 English words
        ("what does 限流 mean", "en"),  # 3 words against 2 characters
        ("限流 mean", "zh"),  # a tie goes to the CJK language
        ("レート制限とは", "ja"),
        ("요청 한도 초과", "ko"),
        ("как настроить", "ru"),
        ("429", "und"),  # nothing but identifiers: no language
        ("chunkSize=800", "und"),
        ("text-embedding-v4 维度", "zh"),  # identifier parts are no English words
        ("东京 天気", "zh"),  # kanji alone cannot be told from Chinese
    ],
)
def test_language_by_script(query: str, language: str) -> None:
    assert detect_language(query) == language


def test_primary_language_of_a_locale() -> None:
    assert [primary_language(x) for x in ("zh-CN", "EN_us", "ja", "")] == ["zh", "en", "ja", ""]


def test_spans_cover_terms_and_identifiers_and_merge() -> None:
    analyzer = TextAnalyzer()
    text = "HTTP 429 means the embeddings API rate limit was hit. 分块大小默认是800。"
    plan = analyzer.plan("429 embedding rate limits 分块大小")
    spans = match_spans(analyzer, text, plan)
    marked = [(text[s.start : s.end], s.identifier) for s in spans]
    assert marked == [
        ("429", True),
        ("embeddings", False),
        ("rate", False),
        ("limit", False),
        ("分块大小", False),
    ]


def test_a_phrase_does_not_light_up_its_stopwords() -> None:
    analyzer = TextAnalyzer()
    text = "The state of the art models beat the old ones."
    spans = match_spans(analyzer, text, analyzer.plan("state-of-the-art"))
    assert [text[s.start : s.end] for s in spans] == ["state", "art"]


def test_no_spans_for_a_text_without_matches() -> None:
    analyzer = TextAnalyzer()
    assert match_spans(analyzer, "nothing relevant here", analyzer.plan("429 限流")) == []


VOCABULARY = [
    "embedding", "embeddings", "Embedded", "rate", "rates", "limit", "limited", "happy",
    "happiness", "800", "8000", "api", "APIs", "configure", "configuration", "run", "running",
    "分块", "大小", "结算", "费用", "的", "。", ", ", " ", "-", "_", "(", ")",
]  # fmt: skip


@given(
    st.lists(st.sampled_from(VOCABULARY), max_size=40),
    st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=5),
)
def test_fast_spans_equal_analysing_every_token(words: list[str], query: list[str]) -> None:
    analyzer = TextAnalyzer()
    text, plan = "".join(words), analyzer.plan(" ".join(query))
    wanted = set(plan.terms) | {w for p in plan.phrases for _, w in p}
    reference = [(t.start, t.end) for t in analyzer.tokens(text) if t.term in wanted]
    covered = {i for start, end in reference for i in range(start, end)}
    spans = match_spans(analyzer, text, plan)
    marked = {i for s in spans for i in range(s.start, s.end)}
    # Word terms must agree exactly; CJK terms may also light up where the
    # segmenter split the text differently (a substring occurrence).
    latin = {i for i in marked ^ covered if not CJK_RUN.match(text[i])}
    assert latin == set()
    assert covered <= marked


@pytest.mark.parametrize(
    ("text", "query", "shown"),
    [
        ("set ｃｈｕｎｋＳｉｚｅ and chunkSize", "chunksize", ["ｃｈｕｎｋＳｉｚｅ", "chunkSize"]),
        ("the ﬁle is read", "file", ["ﬁle"]),
        ("a ＨＥＲＯＮ stands", "heron", ["ＨＥＲＯＮ"]),
        ("value 𝒳 here", "x", ["𝒳"]),
    ],
)
def test_a_word_written_otherwise_than_its_term_is_highlighted(
    text: str, query: str, shown: list[str]
) -> None:
    # Probe: the lexical channel found these (the analyzer folds with NFKC),
    # but the hit came with no highlight for them.
    analyzer = TextAnalyzer()
    spans = match_spans(analyzer, text, analyzer.plan(query))
    assert [text[s.start : s.end] for s in spans] == shown
