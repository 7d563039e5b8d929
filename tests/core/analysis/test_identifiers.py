"""Which pieces are identifiers, and the exact forms a page offers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.analysis.identifiers import (
    document_identifiers,
    find_identifiers,
    held_identifiers,
    is_identifier,
    piece_forms,
    query_identifiers,
    strip_edges,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "piece",
    [
        "429", "8443", "2.4.0", "v2.3.1", "2.4.0-rc.1", "text-embedding-v4", "chunkSize=800",
        "chunkSize", "isArray", "OpenSearch", "X7Q-4291", "E1042", "bm25", "max_tokens",
        "QUOTA_EXCEEDED", "XYZ_API_KEY", "util.isArray", "config/indexer.yaml",
        "index.completed", "Content-Type", "X-Request-Id", "--dry-run", "-v2", ".env",
        "__init__", "C++", "1,000",
        "host:50051", "https://api.example.com/v1",
    ],
)  # fmt: skip
def test_identifier_forms_are_recognised(piece: str) -> None:
    assert is_identifier(piece)


@pytest.mark.parametrize(
    "piece",
    [
        "the", "API", "APIs", "Rate", "long-term", "state-of-the-art", "Non-small", "e-mail",
        "content-type", "and/or", "his/her", "e.g", "i.e", "U.S", "Ph.D", "a.m",
        "20th", "1990s", "12", "5", "a", "--", "...", "", "x" * 129,
    ],
)  # fmt: skip
def test_prose_and_short_numbers_are_not_identifiers(piece: str) -> None:
    assert not is_identifier(piece)


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [
        ('"chunkSize=800",', "chunkSize=800"),
        ("`429`", "429"),
        ("(see", "see"),
        ("**E1042**:", "E1042"),
        ("C++.", "C++"),
        ("client.embeddings.create()", "client.embeddings.create"),
        ("~/.xyz/credentials", "~/.xyz/credentials"),
        ("“限流”", "限流"),
        ("800。", "800"),
    ],
)
def test_edges_lose_punctuation_but_keep_identifier_characters(raw: str, stripped: str) -> None:
    assert strip_edges(raw) == stripped


def test_a_page_offers_the_whole_identifier_and_its_parts() -> None:
    forms = document_identifiers(
        ["Call `client.embeddings.create()` with chunkSize=800 from config/indexer.yaml, "
         "model text-embedding-v4, code X7Q-4291."]
    )  # fmt: skip
    for expected in (
        "client.embeddings.create", "embeddings.create", "chunksize=800", "chunksize", "800",
        "config/indexer.yaml", "indexer.yaml", "text-embedding-v4", "v4", "x7q-4291", "x7q",
        "4291",
    ):  # fmt: skip
        assert expected in forms, expected
    assert "create" not in forms and "text" not in forms and "embedding" not in forms


def test_a_query_keeps_only_whole_pieces() -> None:
    assert query_identifiers("is text-embedding-v3 better than v4?") == ("text-embedding-v3", "v4")
    assert query_identifiers("how do I call client.embeddings.create(model='x')") == (
        "client.embeddings.create",
    )
    assert query_identifiers("What does 限流 mean for 429 errors") == ("429",)
    assert query_identifiers("how to write a long-term plan") == ()
    # Not an identifier as a whole: its identifier parts are asked for.
    assert query_identifiers("edit ~/.bashrc") == (".bashrc",)
    # A comma between digits belongs to the number.
    assert query_identifiers("1,000 patients") == ("1,000",)


def test_numbers_are_not_matched_inside_other_numbers() -> None:
    forms = set(document_identifiers(["bind 127.0.0.1, pay $25,000, Python v2.3.10"]))
    assert "0.1" not in forms and "3.10" not in forms and "000" not in forms
    assert {"127.0.0.1", "25,000", "v2.3.10"} <= forms


def test_held_identifiers_agree_with_the_index_whatever_the_folding() -> None:
    texts = ["レート制限を超えると ４２９ エラー", "ｃｈｕｎｋＳｉｚｅ＝８００", "İSTANBUL_v2"]
    for text in texts:
        indexed = set(document_identifiers([text]))
        assert indexed, text
        assert held_identifiers([text], sorted(indexed)) == indexed, text


def test_a_match_is_placed_on_the_identifier_not_on_a_near_miss() -> None:
    text = "see 4290/429 and ４２９"
    spans = [text[m.start : m.end] for m in find_identifiers(text, ["429"])]
    assert spans == ["429", "４２９"]
    assert text.index("429", 5) == next(find_identifiers(text, ["429"])).start


def test_full_width_identifiers_in_a_query_are_folded() -> None:
    assert query_identifiers("ｃｈｕｎｋＳｉｚｅ＝８００") == ("chunksize=800",)


def test_matches_are_whole_pieces_with_offsets() -> None:
    text = "Error 4290 is not 429; ERROR 429. Also x429 and 429-retry."
    found = [(m.start, m.end) for m in find_identifiers(text, ["429"])]
    assert [text[s:e] for s, e in found] == ["429", "429", "429"]
    assert found[0][0] == text.index("429;")
    # `429-retry` offers 429 as a part; `x429` does not.
    assert found[-1][0] == text.index("429-retry")


def test_matches_inside_chinese_text() -> None:
    text = "将chunkSize设置为800，超过返回429错误。"
    spans = [
        (m.identifier, text[m.start : m.end]) for m in find_identifiers(text, ["chunksize", "429"])
    ]
    assert ("chunksize", "chunkSize") in spans and ("429", "429") in spans


@given(st.text(max_size=200))
def test_any_text_is_safe_and_forms_are_single_terms(text: str) -> None:
    forms = document_identifiers([text])
    assert all(form and not any(ch.isspace() for ch in form) for form in forms)
    for identifier in query_identifiers(text):
        assert identifier in piece_forms(identifier) or identifier == identifier.lower()


def test_a_header_name_matches_a_page_that_writes_it_in_lower_case() -> None:
    asked = query_identifiers("what does Content-Type do")
    assert asked == ("content-type",)
    assert held_identifiers(["set the content-type header"], asked) == {"content-type"}
    assert query_identifiers("long-term content-type plans") == ()


_PIECE_TEXT = st.text(
    alphabet=st.sampled_from(list("ab429.=-_/ Ｚ４２９＝ｃ İı¼⑴ﬁ:;,\n")), max_size=60
)


@given(_PIECE_TEXT, st.lists(_PIECE_TEXT, max_size=3))
def test_held_identifiers_are_the_indexed_forms_asked_for(text: str, others: list[str]) -> None:
    """Whatever the text: exactly what `document_identifiers` indexes, among
    the identifiers asked for (its own forms, and forms of other texts)."""
    indexed = set(document_identifiers([text]))
    asked = sorted(indexed | {form for other in others for form in document_identifiers([other])})
    assert held_identifiers([text], asked) == indexed & set(asked)
