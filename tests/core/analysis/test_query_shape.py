"""A query reads as a question, or as a few remembered words."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.analysis.query_shape import QueryShape, query_shape

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "words", "question"),
    [
        ("How do I keep an ingest from leaving the two stores out of step?", 14, True),
        ("what is the rate limit of the embedding API", 9, True),
        ("删掉的索引还能找回来吗", 6, True),  # 11 Han characters: 6 words, 的 and 吗
        ("promisify penalty", 2, False),  # remembered words: no function word
        ("repack program filename accepts stderr performance", 6, False),
        ("限流 配置", 2, False),
        ("429", 0, False),  # an identifier is no word
        ("what does 429 mean for text-embedding-v4", 4, True),
        ("the", 1, False),  # too short
        # Interrogatives and auxiliaries, which the query stopwords lack.
        ("do equivalent phrase groups affect semantic ranking", 7, True),
        ("幂等 key expires after how long", 6, True),
        ("what does 召回率 mean", 5, True),
    ],
)
def test_words_and_whether_the_query_reads_as_a_question(
    text: str, words: int, question: bool
) -> None:
    shape = query_shape(text)
    assert shape.words == words
    assert shape.reads_as_question(4) is question


def test_the_threshold_is_the_callers() -> None:
    shape = QueryShape(words=3, function_words=1)
    assert shape.reads_as_question(3) and not shape.reads_as_question(4)
    assert not QueryShape(words=9, function_words=0).reads_as_question(1)


@given(st.text(max_size=1000))  # the Retriever's own query limit, in characters
def test_any_query_text_has_a_shape_within_its_length(text: str) -> None:
    """The counts loop over the text once per rule: never an error, and
    never more words than characters (a word needs a letter or two Han)."""
    shape = query_shape(text)
    assert 0 <= shape.words <= len(text)
    assert shape.function_words >= 0
    assert shape.reads_as_question(1) == (shape.words >= 1 and shape.function_words > 0)


@given(st.integers(min_value=0, max_value=12))
def test_the_word_count_follows_the_question_around_the_threshold(extra: int) -> None:
    """Around the 4-word threshold: `the` plus `extra` content words."""
    text = " ".join(["the", *(["limit"] * extra)])
    assert query_shape(text) == QueryShape(extra + 1, 1)
    assert query_shape(text).reads_as_question(4) is (extra + 1 >= 4)
