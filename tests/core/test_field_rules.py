"""The shared field rules (services.core.field_rules): one-line text,
language tags and RFC 3339 times, as the Indexer, the Retriever and the
Gateway apply them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from services.core.field_rules import (
    canonical_language_tag,
    hidden_character_problem,
    language_tag_problem,
    parse_rfc3339,
    without_hidden_characters,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("abc\u202etxt.exe", "contains the format character U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("\u200b", "contains the format character U+200B (ZERO WIDTH SPACE)"),
        ("v\x1bv", "contains the control character U+001B"),
        ("k\x00", "contains the control character U+0000"),
        ("a\nb", "contains the control character U+000A"),
        ("a\tb", "contains the control character U+0009"),
        ("a\x85b", "contains the control character U+0085"),
        ("a\u2028b", "contains the format character U+2028 (LINE SEPARATOR)"),
        ("\u2066x\u2069", "contains the format character U+2066 (LEFT-TO-RIGHT ISOLATE)"),
        ("x\ufeff", "contains the format character U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
        ("a\u00adb", "contains the format character U+00AD (SOFT HYPHEN)"),
        ("\U000e0041", "contains the format character U+E0041 (TAG LATIN CAPITAL LETTER A)"),
    ],
)
def test_control_and_format_characters_are_refused_in_one_line_text(
    value: str, problem: str
) -> None:
    assert hidden_character_problem(value) == problem


@pytest.mark.parametrize(
    "value",
    [
        "",
        "Vec<T> in Rust",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian word with ZWNJ
        "\U0001f468\u200d\U0001f469\u200d\U0001f467 plans",  # emoji ZWJ sequence
        "\u05e9\u05dc\u05d5\u05dd 2024\u200f",  # RLM after a number in Hebrew
        "\u0600\u0661\u0662",  # Arabic number sign: a visible format character
        "caf\u00e9 \u4e2d\u6587",
    ],
)
def test_words_that_need_joiners_and_marks_are_one_line_text(value: str) -> None:
    assert hidden_character_problem(value) is None


@pytest.mark.parametrize("value", ["line one\nline two", "a\tb", "a\r\nb"])
def test_a_metadata_value_may_break_lines(value: str) -> None:
    assert hidden_character_problem(value, line_breaks=True) is None
    assert hidden_character_problem(value) is not None


@pytest.mark.parametrize("value", ["v\x1bv", "k\x00", "a\u202eb", "\u200b"])
def test_a_metadata_value_refuses_the_other_hidden_characters(value: str) -> None:
    assert hidden_character_problem(value, line_breaks=True) is not None


def test_derived_text_is_cleaned_rather_than_refused() -> None:
    assert without_hidden_characters("Set\u00adup \u200bguide\u202e") == "Setup guide"
    assert without_hidden_characters("\u0645\u06cc\u200c") == "\u0645\u06cc\u200c"


@pytest.mark.parametrize(
    "tag",
    [
        "en",
        "zh-CN",
        "zh-Hant-TW",
        "sr-Latn-RS",
        "pt-br",  # subtags after the language are case-insensitive
        "es-419",
        "de-CH-1996",
        "sl-rozaj-biske",
        "en-US-u-ca-gregory",
        "en-US-x-twain",
        "zh-yue-HK",
        "a" * 2 + "-" + "b" * 8 + "-" + "c" * 8 + "-" + "d" * 8 + "-" + "e" * 5,  # 35
    ],
)
def test_well_formed_language_tags(tag: str) -> None:
    assert language_tag_problem(tag) is None


@pytest.mark.parametrize(
    "tag",
    ["en\n", "<script>", "EN", "en_US", "en-", "-en", "e", "english", "x-default", "en--us",
     "en-US-", "en-a", "zh-CN\x00", " en", "\u0435n"],
)  # fmt: skip
def test_malformed_language_tags_are_refused_naming_the_rule(tag: str) -> None:
    assert language_tag_problem(tag) == (
        f"{tag!r} is not a BCP 47 language tag such as 'en', 'zh-CN' or 'zh-Hant-TW' "
        "(language subtag in lower case)"
    )


def test_a_language_tag_is_bounded() -> None:
    assert language_tag_problem("en-" + "abcdefgh-" * 4) == "39 characters, limit is 35"


@pytest.mark.parametrize(
    ("value", "instant"),
    [
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01t12:00:00z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        (
            "2024-05-01T14:00:00.5+02:00",
            datetime(2024, 5, 1, 14, 0, 0, 500000, tzinfo=timezone(timedelta(hours=2))),
        ),
        ("2024-05-01T12:00:00.123456789Z", datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)),
        ("2016-12-31T23:59:60Z", datetime(2016, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ],
)
def test_rfc3339_date_times(value: str, instant: datetime) -> None:
    assert parse_rfc3339(value) == instant


@pytest.mark.parametrize(
    "value",
    [
        "2024-01-01T00:00:00Z\x00",  # datetime.fromisoformat ignores the NUL
        "2024-01-01T00:00:00+00:00\n",
        "2024-01-01T00:00:00",  # no offset
        "2024-01-01 00:00:00Z",
        "2024-02-30T00:00:00Z",
        "2024-01-01T25:00:00Z",
        "2024-01-01T00:00:00+24:00",
        "20240101T000000Z",
        "2024-01-01",  # a date alone, where a time is asked for
        "\uff12024-01-01T00:00:00Z",  # a full-width digit
    ],
)
def test_other_times_are_refused(value: str) -> None:
    assert parse_rfc3339(value) is None


def test_a_full_date_where_a_date_is_enough() -> None:
    assert parse_rfc3339("2024-05-01", date_only=True) == datetime(2024, 5, 1)
    assert parse_rfc3339("2024-02-30", date_only=True) is None


@pytest.mark.parametrize(
    ("tag", "canonical"),
    [
        ("zh-cn", "zh-CN"),
        ("zh-hant-tw", "zh-Hant-TW"),
        ("pt-br", "pt-BR"),
        ("es-419", "es-419"),
        ("de-ch-1996", "de-CH-1996"),
        ("en-us-u-CA-gregory", "en-US-u-ca-gregory"),  # after a singleton: lower case
        ("en-US-x-TWAIN", "en-US-x-twain"),
        ("zh-YUE-hk", "zh-yue-HK"),
        ("en", "en"),
        ("", ""),  # no tag: left for validation
        ("EN", "EN"),  # malformed (language subtag in upper case): left for validation
        ("bad locale", "bad locale"),
    ],
)
def test_a_language_tag_is_read_in_canonical_case(tag: str, canonical: str) -> None:
    assert canonical_language_tag(tag) == canonical
