"""The one definition of an empty query (services.core.query_text), shared
by the gateway, the Retriever and the Reranker."""

from __future__ import annotations

import unicodedata

import pytest

from services.core.query_text import EMPTY_QUERY, NO_TERM_QUERY, is_empty_query, query_problem

pytestmark = pytest.mark.unit

# The inputs of the adversarial review: once 10 arbitrary hits (or, for the
# last two, a downstream call and a unit of the gateway's daily budget).
INVISIBLE_QUERIES = ["\u200c", "\u2061\u2062", "\ufe0f", "\U0001d173", "\u200b", "\x00", "\u3000"]


@pytest.mark.parametrize("query", INVISIBLE_QUERIES)
def test_invisible_characters_alone_are_an_empty_query(query: str) -> None:
    assert is_empty_query(query)
    assert is_empty_query(f" {query}\t{query}\n")


@pytest.mark.parametrize(
    "query",
    [
        "",
        "\u00a0\u2009\u2028\u2029\x85",  # whitespace of every kind
        "\x01\x1b\x7f\x9f",  # C0 and C1 controls, DEL
        "\u00ad\u061c\u200e\u202e\u2066\u2069\ufeff",  # format: soft hyphen, bidi marks, BOM
        "\u034f\u115f\u1160\u3164\uffa0\u180b\u180e",  # default-ignorable, not format
        "\ufe00\U000e0100\U000e01ef",  # variation selectors
        "\U000e0001\U000e0041\U000e007f",  # tags
        "\U0001bca0\U0001d17a\U000e0fff",  # shorthand format, musical, reserved ignorable
    ],
)
def test_every_invisible_class_counts(query: str) -> None:
    assert is_empty_query(query)


@pytest.mark.parametrize(
    "query",
    ["a", " 429 ", "\u4e2d", "\u200d\U0001f44d", "C++", "\u0301", "\ue000", "?", "\u00a0x"],
)
def test_one_visible_character_is_a_query(query: str) -> None:
    assert not is_empty_query(query)


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, stable
# since Unicode 6) and White_Space (PropList.txt), written out here so the
# `regex` module's tables are checked against the standard's own list.
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
]  # fmt: skip
WHITE_SPACE = [
    (0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085), (0x00A0, 0x00A0),
    (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
    (0x205F, 0x205F), (0x3000, 0x3000),
]  # fmt: skip


def _in(ranges: list[tuple[int, int]], cp: int) -> bool:
    return any(low <= cp <= high for low, high in ranges)


def test_exactly_whitespace_controls_format_and_default_ignorables_are_invisible() -> None:
    for cp in range(0x110000):
        category = unicodedata.category(chr(cp))
        if category == "Cn" and not _in(DEFAULT_IGNORABLE, cp):
            continue  # unassigned in Python's tables, maybe assigned in newer ones
        expected = category in {"Cc", "Cf"} or _in(DEFAULT_IGNORABLE, cp) or _in(WHITE_SPACE, cp)
        assert is_empty_query(chr(cp)) == expected, f"U+{cp:04X} ({category})"


def test_the_message_names_the_field() -> None:
    assert EMPTY_QUERY.startswith("query: is empty")


@pytest.mark.parametrize(
    "query",
    ["\u0301\u0302", "\u2800", "\u2800\u2800 \u2800", "...", "?!", "\u3002\uff1f", "-_-", "\ue000"],
)
def test_a_query_without_a_letter_digit_or_symbol_is_refused(query: str) -> None:
    """The inputs of the adversarial review (once 10 arbitrary vector hits):
    marks, the braille blank, punctuation; also a private-use character."""
    assert not is_empty_query(query)
    assert query_problem(query) == NO_TERM_QUERY


@pytest.mark.parametrize(
    "query",
    [
        "429",
        "text-embedding-v4",
        "chunkSize=800",
        "client.embeddings.create()",
        "\u4e2d\u6587\u6587\u6863",
        "+",  # a math symbol
        "\u20ac",  # a currency symbol
        "\U0001f44d",  # an emoji (So)
        "e\u0301",  # a letter with its mark
        "...a",
    ],
)
def test_a_letter_digit_or_symbol_makes_a_query(query: str) -> None:
    assert query_problem(query) is None


def test_an_invisible_query_is_reported_as_empty_first() -> None:
    assert query_problem("\u200b") == EMPTY_QUERY
