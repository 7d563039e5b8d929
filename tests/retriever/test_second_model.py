"""Where the second vector's channel runs (services.retriever.second_model.SecondModel):
a model of several languages crosses them; a model of one language is a second
voice for its own language's questions over its own language's pages (unit,
stand-in models that declare only their languages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from services.core.models import ScoredChunk
from services.embedding.packaged_models import ENGLISH, MUSE_LANGUAGES
from services.retriever.second_model import SecondModel
from tests.storage.harness import make_chunk

pytestmark = pytest.mark.unit


@dataclass
class DeclaredLanguages:
    """Stands in for an Embedder: only what it reads."""

    languages: frozenset[str]


def second(languages: frozenset[str]) -> SecondModel:
    return SecondModel.of(cast(Any, DeclaredLanguages(languages)))


def test_a_model_of_many_languages_crosses_them_and_reads_every_locale() -> None:
    muse = second(MUSE_LANGUAGES)
    assert muse.crosses
    assert muse.pages(("en", "zh-CN")) == ("en", "zh-CN")


def test_an_english_model_is_a_voice_for_english_questions_over_english_pages() -> None:
    bge = second(ENGLISH)
    assert not bge.crosses
    assert bge.unread("en", ()) == ""  # one list: the scope is searched as it is
    assert bge.unread("en", ("en-US", "zh-CN")) == ""
    assert bge.pages(("en-US", "zh-CN")) == ("en-US",)


def test_an_english_model_says_why_it_is_left_out() -> None:
    bge = second(ENGLISH)
    assert bge.unread("zh", ("en", "zh-CN")) == (
        "the second model reads en only; the question reads as zh"
    )
    assert bge.unread("en", ("zh-CN", "ja")) == (
        "the second model reads en only; the scope holds zh-CN, ja"
    )


def test_an_english_model_hears_only_pages_it_reads() -> None:
    bge, muse = second(ENGLISH), second(MUSE_LANGUAGES)
    english, chinese, unknown = (make_chunk("d", 0, locale=x) for x in ("en-GB", "zh-CN", ""))
    assert [bge.reads_page(ScoredChunk(c, 1.0)) for c in (english, chinese, unknown)] == [
        True,
        False,
        True,  # nothing says the model cannot read it
    ]
    assert muse.reads_page(ScoredChunk(chinese, 1.0))
