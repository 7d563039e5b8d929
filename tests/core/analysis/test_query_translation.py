"""Dictionary translation of a question's words, on the packaged CC-CEDICT (unit:
real data, no model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core.analysis.bilingual_dictionary import (
    BilingualDictionary,
    Entry,
    clean_gloss,
    load_cedict,
    parse_cedict,
)
from services.core.analysis.query_translation import MAX_SOURCE_WORDS, QueryTranslator

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def translator() -> QueryTranslator:
    return QueryTranslator(load_cedict())


@pytest.mark.parametrize(
    ("sense", "gloss"),
    [
        ("to deploy", "deploy"),
        ("(computer networking) rate limiting", "rate limiting"),
        ("CL:個|个[ge4]", None),
        ("variant of 症[zheng4]", None),
        ("surname Pei", None),
        ("to act on behalf of sb in a responsible position", None),  # describes, not a word
        ("(math.) vector", "vector"),
    ],
)
def test_senses_become_short_glosses_or_are_left_out(sense: str, gloss: str | None) -> None:
    assert clean_gloss(sense) == gloss


def test_synonyms_inside_one_sense_are_glosses_of_their_own() -> None:
    line = "發票 发票 [fa1 piao4] /invoice; receipt; bill/uniform invoice/"
    (entry,) = parse_cedict(["# a comment", line, "not an entry"])
    assert entry == Entry("发票", ("invoice", "receipt", "bill", "uniform invoice"))


def test_the_packaged_dictionary_loads_both_directions() -> None:
    dictionary = load_cedict()
    assert len(dictionary) > 80_000
    assert dictionary.glosses("检索")[:2] == ["retrieve", "look up"]
    assert "发票" in dictionary.chinese_for("invoice")


def test_the_kept_entries_build_the_same_dictionary_and_a_bad_copy_is_rebuilt(
    tmp_path: Path,
) -> None:
    parsed = load_cedict()
    kept = load_cedict.__wrapped__(tmp_path)  # parses, keeps the entries
    (copy,) = tmp_path.glob("cedict-*.marshal")
    again = load_cedict.__wrapped__(tmp_path)  # reads them
    for built in (kept, again):
        assert built._by_chinese == parsed._by_chinese
        assert built._by_gloss == parsed._by_gloss
    copy.write_bytes(b"not marshal data")  # a torn or foreign file
    assert len(load_cedict.__wrapped__(tmp_path)) == len(parsed)
    assert copy.stat().st_size > 1_000_000  # written whole again
    assert list(tmp_path.glob("*.partial")) == []


def test_a_folder_that_cannot_be_written_only_costs_the_parse(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would be")
    assert len(load_cedict.__wrapped__(blocked / "cache")) > 80_000


def test_a_chinese_question_becomes_english_words(translator: QueryTranslator) -> None:
    translation = translator.translate("发票在哪里下载", "zh", "en")
    assert translation is not None
    assert translation.words == (("发票", ("invoice", "receipt", "bill")), ("下载", ("download",)))
    assert translation.text == "invoice receipt bill download"  # 在, 哪里: function words
    assert translation.describe() == "发票 → invoice, receipt, bill; 下载 → download"


def test_english_names_inside_a_chinese_question_are_kept(translator: QueryTranslator) -> None:
    translation = translator.translate("API 密钥多久过期", "zh", "en")
    assert translation is not None
    assert translation.text.startswith("API ")
    assert "key" in translation.text.split()


def test_an_english_phrase_is_looked_up_before_its_words(translator: QueryTranslator) -> None:
    translation = translator.translate("What is rate limiting of invoices?", "en", "zh")
    assert translation is not None
    sources = [source for source, _ in translation.words]
    assert sources == ["rate limiting", "invoices"]  # what, is, of: function words
    assert translation.words[0][1] == ("限流",)
    assert translation.words[1][1][0] == "发票"  # the plural by its singular first


def test_each_word_gives_at_most_per_word_translations() -> None:
    translator = QueryTranslator(load_cedict(), per_word=1)
    translation = translator.translate("发票", "zh", "en")
    assert translation is not None and translation.text == "invoice"
    with pytest.raises(ValueError, match="per_word"):
        QueryTranslator(load_cedict(), per_word=0)


def test_nothing_to_translate_gives_none(translator: QueryTranslator) -> None:
    assert translator.translate("bonjour", "fr", "en") is None
    assert translator.translate("的了吗", "zh", "en") is None
    assert translator.translate("what is it", "en", "zh") is None


def test_common_words_come_first_among_equal_senses() -> None:
    dictionary = BilingualDictionary(
        [Entry("椠", ("edition",)), Entry("版本", ("version", "edition"))]
    )
    assert dictionary.chinese_for("edition") == ["版本", "椠"]  # jieba: 版本 is far more common


def test_a_long_question_translates_a_bounded_number_of_words(
    translator: QueryTranslator,
) -> None:
    translation = translator.translate("发票下载服务器部署密钥" * 100, "zh", "en")
    assert translation is not None
    assert len(translation.words) == MAX_SOURCE_WORDS
    assert len(translation.text.split()) <= MAX_SOURCE_WORDS * translator.per_word


_WORDS = [
    "发票",
    "下载",
    "密钥",
    "的",
    "限流",
    "部署",
    "服务器",
    "rate",
    "limiting",
    "API",
    "the",
    "keys",
]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(st.sampled_from(_WORDS) | st.text(max_size=12), max_size=400),
    source=st.sampled_from(["zh", "en"]),
)
def test_any_text_translates_within_the_bounds(
    translator: QueryTranslator, words: list[str], source: str
) -> None:
    """Mixed scripts, punctuation, empty runs and questions near the length
    limit: always a result within MAX_SOURCE_WORDS × per_word, or None."""
    text = " ".join(words)[:1000]
    target = "en" if source == "zh" else "zh"
    translation = translator.translate(text, source, target)
    if translation is None:
        return
    assert 1 <= len(translation.words) <= MAX_SOURCE_WORDS
    assert all(1 <= len(targets) <= translator.per_word for _, targets in translation.words)
    translated = [t for _, targets in translation.words for t in targets]
    assert translation.text.split()[-len(translated) :] == " ".join(translated).split()
