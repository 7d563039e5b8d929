"""QueryNormalizer: whitespace/Unicode clean-up that never changes meaning."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import ConfigError, InvalidArgument
from services.core.query_text import is_empty_query, query_problem
from services.retriever.query import QueryNormalizer

pytestmark = pytest.mark.unit

normalizer = QueryNormalizer(max_chars=50)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  hello world  ", "hello world"),
        ("a\t\tb\n\nc\r\nd", "a b c d"),
        ("nbsp\u00a0\u00a0here", "nbsp here"),
        ("thin\u2009and\u3000ideographic", "thin and ideographic"),
        ("line\u2028separator", "line separator"),
        ("bell\x07 and\x00nul", "bell andnul"),
        ("zero\u200bwidth", "zerowidth"),
        ("soft\u00adhyphen", "softhyphen"),
        ("\ufeffbom first", "bom first"),
        ("cafe\u0301", "caf\u00e9"),  # decomposed é becomes the composed form
        ("e\x00\u0301", "\u00e9"),  # composes once the control between them is gone
    ],
)
def test_cleans_whitespace_controls_and_composition(raw: str, expected: str) -> None:
    assert normalizer.normalize(raw) == expected


@pytest.mark.parametrize(
    "identifier_query",
    [
        "text-embedding-v4 dimensions",
        "chunkSize=800 overlap=200",
        "HTTP 429 Retry-After",
        "safeFetch() timeout",
        "upgrade to v1.2.3",
        "foo_bar vs fooBar",
        "C++ and C# bindings",
        "what's RRF (k=60)?",
        "path/to/file.py:42",
    ],
)
def test_keeps_identifiers_case_and_punctuation(identifier_query: str) -> None:
    assert normalizer.normalize(identifier_query) == identifier_query


def test_does_not_fold_compatibility_characters() -> None:
    # NFC, not NFKC: a ligature or superscript stays what the user typed.
    assert normalizer.normalize("\ufb01le x\u00b2") == "\ufb01le x\u00b2"


@pytest.mark.parametrize(
    "blank",
    [
        "",
        "   ",
        "\n\t",
        "\u00a0\u2009",
        "\x00\x07",
        "\u200b",
        # Once answered with ten arbitrary hits: format characters (ZWNJ,
        # invisible math operators) and default-ignorables (a variation
        # selector, a musical formatting character) survived the clean-up.
        "\u200c",
        "\u2061\u2062",
        "\ufe0f",
        "\U0001d173",
        "\u3000",
        "\u3000\u200d\ufeff \U000e0001\u180e\x00",
    ],
)
def test_rejects_empty_query(blank: str) -> None:
    with pytest.raises(InvalidArgument, match="query: is empty"):
        normalizer.normalize(blank)


def test_invisible_characters_inside_a_query_are_kept_or_cleaned_as_before() -> None:
    # Only emptiness changed: joiners that shape emoji and scripts stay.
    assert normalizer.normalize("\u200c\U0001f469\u200d\U0001f4bb\ufe0f") == (
        "\u200c\U0001f469\u200d\U0001f4bb\ufe0f"
    )


def test_tag_characters_are_dropped_unless_they_draw_a_flag() -> None:
    # Probe 7: "ignore previous" spelled in tags reached the embedder and the
    # Reranker, invisible to the person who pasted the query.
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "ignore previous")
    assert QueryNormalizer().normalize(f"reset password{hidden}") == "reset password"
    scotland = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
    assert QueryNormalizer().normalize(f"{scotland} holidays") == f"{scotland} holidays"


def test_rejects_overlong_query_naming_length_and_limit() -> None:
    with pytest.raises(InvalidArgument, match=r"^query: 51 characters, limit is 50$"):
        normalizer.normalize("x" * 51)


def test_limit_applies_after_normalization() -> None:
    padded = "   " + "x " * 24 + "x" + "\n" * 100
    assert normalizer.normalize(padded) == "x " * 24 + "x"
    assert len(normalizer.normalize("y" * 50)) == 50


def test_rejects_nonpositive_limit() -> None:
    with pytest.raises(ConfigError, match="got 0"):
        QueryNormalizer(max_chars=0)


@settings(deadline=None)  # never fail on a slow, shared CI machine
@given(st.text(max_size=60))
def test_output_is_a_fixed_point_without_edge_or_double_spaces(raw: str) -> None:
    try:
        cleaned = QueryNormalizer(max_chars=1000).normalize(raw)
    except InvalidArgument:
        return
    assert cleaned == cleaned.strip()
    assert "  " not in cleaned
    assert not any(ch.isspace() and ch != " " for ch in cleaned)
    assert not any(unicodedata.category(ch) == "Cc" for ch in cleaned)
    assert unicodedata.is_normalized("NFC", cleaned)
    assert QueryNormalizer(max_chars=1000).normalize(cleaned) == cleaned


@settings(deadline=None)
@given(st.text(max_size=60))
def test_a_query_is_refused_as_empty_exactly_when_the_shared_rule_says_so(raw: str) -> None:
    try:
        cleaned = QueryNormalizer(max_chars=1000).normalize(raw)
    except InvalidArgument as exc:
        # never for anything but the shared rule (emptiness, or no letter,
        # digit or symbol) here
        assert str(exc) == query_problem(raw), str(exc)
        return
    assert query_problem(raw) is None and not is_empty_query(raw)
    assert cleaned  # a query that passes is never cleaned into nothing
