"""`metadata["translations"]`: written within a size limit, read back
defensively (a malformed value carries nothing, never an error)."""

from __future__ import annotations

import json

import pytest

from services.core.errors import InvalidArgument
from services.core.translation_links import (
    MAX_TRANSLATIONS,
    Translation,
    decode_translations,
    encode_translations,
    is_web_url,
)
from services.indexer.document_fields import check_web_url

pytestmark = pytest.mark.unit

ZH = Translation("zh-CN", "zh-CN/setup.md", "https://example.com/zh-CN/setup.md")
JA = Translation("ja", "ja/setup.md", "/ja/setup.md")


def test_compact_json_sorted_by_locale_round_trips() -> None:
    value, left_out = encode_translations([ZH, JA, ZH], max_chars=1024)
    assert left_out == 0
    assert value == (
        '[{"locale":"ja","url":"/ja/setup.md","doc_id":"ja/setup.md"},'
        '{"locale":"zh-CN","url":"https://example.com/zh-CN/setup.md","doc_id":"zh-CN/setup.md"}]'
    )
    assert decode_translations(value) == (JA, ZH)


def test_non_ascii_is_kept_as_written_and_counts_as_one_character() -> None:
    page = Translation("zh-CN", "zh-CN/安装.md", "zh-CN/%E5%AE%89%E8%A3%85.md")
    value, _ = encode_translations([page], max_chars=1024)
    assert "安装" in value and decode_translations(value) == (page,)


def test_as_many_as_fit_in_locale_order_and_the_rest_is_counted() -> None:
    pages = [
        Translation(tag, f"{tag}/p", f"/{tag}/p") for tag in ["ko", "de", "en", "fr", "ja", "it"]
    ]
    one = len(encode_translations(pages[:1], 10_000)[0])  # "[{...}]"
    limit = 2 + 3 * (one - 2) + 2  # three entries and their two commas
    value, left_out = encode_translations(pages, limit)
    assert len(value) <= limit and left_out == 3
    assert [t.locale for t in decode_translations(value)] == ["de", "en", "fr"]


def test_an_entry_too_long_to_fit_does_not_push_out_the_others() -> None:
    long = Translation("de", "de/p", "/de/" + "x" * 2000)
    value, left_out = encode_translations([long, JA, ZH], max_chars=1024)
    assert left_out == 1 and decode_translations(value) == (JA, ZH)


def test_entries_the_retriever_would_drop_are_not_written() -> None:
    bad = [Translation("", "a", "/a"), Translation("fr", "b", "file:b"),
           Translation("de", "c", "javascript:alert(1)")]  # fmt: skip
    assert encode_translations(bad, 1024) == ("", 0)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "not json",
        "{",
        '{"locale": "en", "url": "/en/"}',  # an object, not a list
        '"[]"',
        "[1, 2]",
        "[" * 100_000,
        "[]",
        json.dumps([{"locale": "en"}]),  # no url
        json.dumps([{"locale": 5, "url": "/en/"}]),
        json.dumps([{"locale": "en", "url": ["/en/"]}]),
        json.dumps([{"locale": "english!", "url": "/en/"}]),
        json.dumps([{"locale": "en", "url": "/en/", "doc_id": 7}]),
        json.dumps([{"locale": "en", "url": "javascript:alert(1)"}]),
        json.dumps([{"locale": "en", "url": "data:text/html,<script>x</script>"}]),
        json.dumps([{"locale": "en", "url": " https://example.com/"}]),
        json.dumps([{"locale": "en", "url": "//evil.example/"}]),
        json.dumps([{"locale": "en", "url": "https:\\\\evil.example"}]),
        json.dumps([{"locale": "en", "url": "/en/", "doc_id": "a\nb"}]),
    ],
)
def test_malformed_values_carry_nothing(value: str) -> None:
    assert decode_translations(value) == ()


def test_good_entries_survive_bad_neighbours_and_doc_id_is_optional() -> None:
    value = json.dumps(
        [
            {"locale": "en", "url": "javascript:alert(1)"},
            {"locale": "en", "url": "https://example.com/en/"},
            "junk",
            {"locale": "en", "url": "https://example.com/en/"},  # a repeat
            {"locale": "fr", "url": "../fr/", "doc_id": "fr/index.md", "extra": True},
        ]
    )
    assert decode_translations(value) == (
        Translation("en", "", "https://example.com/en/"),
        Translation("fr", "fr/index.md", "../fr/"),
    )


def test_a_value_holds_a_bounded_number_of_translations() -> None:
    many = [{"locale": "en", "url": f"/p{i}"} for i in range(MAX_TRANSLATIONS + 10)]
    assert len(decode_translations(json.dumps(many))) == MAX_TRANSLATIONS


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/a",
        "HTTP://example.com",
        "http://[::1]:8080/",
        "/zh-CN/setup.html",
        "zh-CN/setup.html?x=1#top",
        "../en/",
        "#top",
        "",
        "http://",
        "https://[::1/",
        "file:zh-CN/setup.md",
        "mailto:a@example.com",
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "data:text/html,x",
        " https://example.com/",
        "https://example.com/ ",
        "https:\\\\evil.example",
        "//evil.example/x",
        "a:b/c",
    ],
)
def test_the_url_rule_is_the_indexers(url: str) -> None:
    try:
        check_web_url("url", url)
        indexer_accepts = bool(url)  # the Indexer allows an empty url; a link needs one
    except InvalidArgument:
        indexer_accepts = False
    assert is_web_url(url) is indexer_accepts
