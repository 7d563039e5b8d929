"""Ranking across languages: per-locale vector lists taken in turns (unit)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.analysis.bilingual_dictionary import BilingualDictionary, Entry
from services.core.analysis.query_translation import QueryTranslator
from services.core.deadline import Deadline
from services.core.models import ScopeFilter, ScoredChunk
from services.retriever.fusion import RrfFuser, cap_per_document
from services.retriever.locale_balance import LocaleBalance, fuse_locales
from services.retriever.locale_turns import interleaved, interleaved_documents
from services.retriever.pipeline import RetrievalConfig, RetrievalPipeline, RetrievalRequest
from services.retriever.scope_locales import IndexLocales, LocaleRead
from services.retriever.steps import LanguageCrossing, build_retrieval_steps
from services.retriever.types import Channel
from services.storage.base import VectorQuery
from services.storage.storage import Storage
from tests.retriever.factories import hit, ranked_list, scored

pytestmark = pytest.mark.unit


def test_lists_are_taken_in_turns_and_a_short_one_is_skipped() -> None:
    en, zh = ranked_list("en1", "en2", "en3"), ranked_list("zh1")
    assert [h.chunk.chunk_id for h in interleaved([en, zh])] == ["en1", "zh1", "en2", "en3"]
    assert interleaved([]) == []


def test_locales_take_turns_by_document_and_a_further_chunk_takes_no_turn() -> None:
    en = [
        hit("a1", doc_id="A"),
        hit("a2", doc_id="A"),
        hit("b1", doc_id="B"),
        hit("a3", doc_id="A"),
    ]
    zh = [hit("x1", doc_id="X"), hit("y1", doc_id="Y"), hit("x2", doc_id="X")]
    order = [h.chunk.chunk_id for h in interleaved_documents([en, zh])]
    # a2 rides with B's turn (it ranked above b1); a3 and x2 come after their list's last page
    assert order == ["a1", "x1", "a2", "b1", "a3", "y1", "x2"]
    capped = cap_per_document(interleaved_documents([en, zh]), 1)
    assert [h.chunk.doc_id for h in capped] == ["A", "X", "B", "Y"]  # documents alternate
    assert interleaved_documents([]) == []


class _Embedder:
    """Stands in for the model: the rule only needs the declared languages."""

    dim = 3

    def __init__(self, languages: frozenset[str]) -> None:
        self.languages = languages
        self.embedded: list[list[str]] = []  # the texts of each query pass

    def embed_query(
        self, text: str, deadline: float | None = None, *, partition: str = ""
    ) -> np.ndarray:
        return np.ones(3, dtype=np.float32)

    def embed_queries(
        self, texts: list[str], deadline: float | None = None, *, partition: str = ""
    ) -> np.ndarray:
        self.embedded.append(list(texts))
        return np.ones((len(texts), 3), dtype=np.float32)


class _Vectors:
    """A vector store whose results depend on the locale filter."""

    def __init__(self) -> None:
        self.scopes: list[ScopeFilter] = []
        self.batches: list[int] = []  # queries per search_many call

    def search(
        self, vector: object, limit: int, scope: ScopeFilter, deadline: object = None
    ) -> list[ScoredChunk]:
        self.scopes.append(scope)
        by_locale = {
            "en": ["en-answer"],
            "zh": ["zh-faq"],
            "zh-CN": ["zh-1", "zh-2"],
            "": ["zh-1", "zh-2"],
        }
        return [scored(cid, 0.9 - i / 10) for i, cid in enumerate(by_locale[scope.locale])]

    def search_many(
        self, queries: list[VectorQuery], deadline: object = None
    ) -> list[list[ScoredChunk]]:
        self.batches.append(len(queries))
        return [self.search(q.vector, q.limit, q.scope) for q in queries]


class _Lexical:
    """Finds the English invoice page by the English word only."""

    def __init__(self) -> None:
        self.analyzer = TextAnalyzer()
        self.searches: list[tuple[tuple[str, ...], str]] = []

    def search_plan(
        self, plan: QueryPlan, limit: int, scope: ScopeFilter, deadline: object = None
    ) -> list[ScoredChunk]:
        self.searches.append((plan.terms, scope.locale))
        if "invoic" in plan.terms and scope.locale == "en":  # "invoice", stemmed
            return [_lexical("en-invoice", "en")]
        return []

    def describe_query(self, query: str) -> str:
        return self.analyzer.plan(query).describe()


def _storage(vectors: _Vectors, lexical: _Lexical | None = None) -> Storage:
    return Storage(vectors, lexical or _Lexical(), None)  # type: ignore[arg-type]


def _pipeline(
    executor: ThreadPoolExecutor,
    embedder: _Embedder,
    vectors: _Vectors,
    read: LocaleRead,
    translator: QueryTranslator | None = None,
    lexical: _Lexical | None = None,
    config: RetrievalConfig | None = None,
) -> RetrievalPipeline:
    steps = build_retrieval_steps(
        embedder,  # type: ignore[arg-type]
        _storage(vectors, lexical),
        None,
        executor,
        # A generous channel timeout: these tests are about order and scopes,
        # and on a loaded machine (CI's two workers) a channel once missed the
        # default second and left an answer empty.
        config or replace(RetrievalConfig(), channel_timeout_ms=30_000),
        crossing=LanguageCrossing(IndexLocales(read), translator),
    )
    return RetrievalPipeline(steps)


def _retrieve(  # type: ignore[no-untyped-def]
    languages: frozenset[str],
    locales: tuple[str, ...] | LocaleRead,
    translator: QueryTranslator | None = None,
    lexical: _Lexical | None = None,
    question: str = "怎么申请发票",
    embedder: _Embedder | None = None,
    config: RetrievalConfig | None = None,
    vectors: _Vectors | None = None,
    **request: object,
):
    """`locales`: the locales the index holds, or the read that answers them."""
    read = locales if callable(locales) else lambda *_: locales
    vectors = vectors or _Vectors()
    with ThreadPoolExecutor(2) as executor:
        pipeline = _pipeline(
            executor, embedder or _Embedder(languages), vectors, read, translator, lexical, config
        )
        query = RetrievalRequest(query=question, rerank=False, **request)  # type: ignore[arg-type]
        result = asyncio.run(pipeline.retrieve(query, Deadline.within(10)))
    return result, vectors


def test_a_multilingual_model_ranks_each_locale_apart() -> None:
    result, vectors = _retrieve(frozenset({"*"}), ("en", "zh-CN"))
    # The question's language first, then the locales take turns.
    assert [h.chunk.chunk_id for h in result.hits] == ["zh-1", "en-answer", "zh-2"]
    assert [s.locale for s in vectors.scopes] == ["en", "zh-CN"]
    assert vectors.batches == [2]  # both locales' searches in one store call
    assert any("ranked each locale apart (en, zh-CN)" in note for note in result.notes)


def _lexical(chunk_id: str, locale: str, exact: tuple[str, ...] = ()) -> ScoredChunk:
    hit = scored(chunk_id)
    return replace(hit, chunk=replace(hit.chunk, locale=locale), exact=exact)


def _vector(chunk_id: str, locale: str) -> ScoredChunk:
    return _lexical(chunk_id, locale)


def test_across_languages_only_identifiers_count_lexically() -> None:
    vector = {
        "en": [_vector("en-a", "en"), _vector("en-b", "en")],
        "zh-CN": [_vector("zh-a", "zh-CN")],
    }
    lexical = [
        _lexical("en-b", "en"),  # a Chinese question's words cannot match English text
        _lexical("zh-a", "zh-CN"),
    ]
    fused, _ = fuse_locales(RrfFuser(), vector, lexical, "zh", None)
    by_id = {h.chunk.chunk_id: h for h in fused}
    assert [c.channel for c in by_id["en-b"].channels] == [Channel.VECTOR]
    assert [h.chunk.chunk_id for h in fused] == ["zh-a", "en-a", "en-b"]
    with_identifier = [_lexical("en-b", "en", exact=("e1042",))]
    fused, _ = fuse_locales(RrfFuser(), vector, with_identifier, "zh", None)
    by_id = {h.chunk.chunk_id: h for h in fused}
    assert {c.channel for c in by_id["en-b"].channels} == {Channel.VECTOR, Channel.LEXICAL}


@pytest.mark.parametrize("no_language", ["und", "mul", "zxx"])
def test_the_question_s_words_count_on_pages_tagged_as_no_language(no_language: str) -> None:
    """A page tagged as no language is in no other language than the
    question's: its words matched and counted for nothing (a probe saw the
    only page holding them ranked below an unrelated English one)."""
    vector = {"en": [_vector("en-a", "en")], no_language: [_vector("x-a", no_language)]}
    lexical = [_lexical("x-a", no_language)]
    fused, _ = fuse_locales(RrfFuser(), vector, lexical, "en", None)
    by_id = {h.chunk.chunk_id: h for h in fused}
    assert {c.channel for c in by_id["x-a"].channels} == {Channel.VECTOR, Channel.LEXICAL}


def test_a_question_without_language_puts_the_best_locale_first() -> None:
    vector = {"en": [_vector("en-a", "en")], "zh-CN": [_vector("zh-a", "zh-CN")]}
    lexical = [_lexical("en-a", "en", exact=("429",))]
    fused, _ = fuse_locales(RrfFuser(), vector, lexical, "und", None)
    assert [h.chunk.chunk_id for h in fused] == ["en-a", "zh-a"]


def test_one_list_where_balancing_cannot_matter() -> None:
    fixed, vectors = _retrieve(frozenset({"*"}), ("en", "zh-CN"), scope=ScopeFilter(locale="zh-CN"))
    assert [s.locale for s in vectors.scopes] == ["zh-CN"]
    assert not any("locale apart" in note for note in fixed.notes)
    _, vectors = _retrieve(frozenset({"*"}), ("zh-CN",))
    assert [s.locale for s in vectors.scopes] == [""]
    _, vectors = _retrieve(frozenset({"en"}), ("en", "zh-CN"), query_language="en")
    assert [s.locale for s in vectors.scopes] == [""]


def test_a_locale_filter_no_page_carries_searches_the_tags_of_its_language() -> None:
    """`zh` asked, the scope's Chinese pages tagged `zh-CN`: those, in every
    channel, with a note; a filter a page carries is searched as given."""
    lexical = _Lexical()
    result, vectors = _retrieve(
        frozenset({"*"}), ("en", "zh-CN"), lexical=lexical, scope=ScopeFilter(locale="zh")
    )
    assert [s.locale for s in vectors.scopes] == ["zh-CN"]
    assert [locale for _, locale in lexical.searches] == ["zh-CN"]
    assert not result.degraded, result.notes
    assert [h.chunk.chunk_id for h in result.hits] == ["zh-1", "zh-2"]
    assert any(n.startswith("locale filter 'zh': no page carries that tag") for n in result.notes)
    kept, vectors = _retrieve(frozenset({"*"}), ("en", "zh-CN"), scope=ScopeFilter(locale="zh-CN"))
    assert [s.locale for s in vectors.scopes] == ["zh-CN"]
    assert not any(n.startswith("locale filter") for n in kept.notes)


def test_balancing_can_be_turned_off() -> None:
    config = replace(RetrievalConfig(), vector_locale_balance=LocaleBalance.OFF)
    result, vectors = _retrieve(frozenset({"*"}), ("en", "zh-CN"), question="发票", config=config)
    assert [s.locale for s in vectors.scopes] == [""]
    assert [h.chunk.chunk_id for h in result.hits] == ["zh-1", "zh-2"]


def test_the_translated_question_searches_the_other_locale_in_both_channels() -> None:
    lexical = _Lexical()
    translator = QueryTranslator(BilingualDictionary([Entry("发票", ("invoice",))]))
    result, vectors = _retrieve(frozenset({"*"}), ("en", "zh-CN"), translator, lexical, debug=True)
    # The question's words in its own language everywhere, the translation in English pages only.
    question = TextAnalyzer().plan("怎么申请发票").terms
    assert lexical.searches == [(question, ""), (("invoic",), "en")]
    assert [s.locale for s in vectors.scopes] == ["en", "en", "zh-CN"]  # question, translation
    assert vectors.batches == [3]
    by_id = {h.chunk.chunk_id: h for h in result.hits}
    assert {c.channel for c in by_id["en-invoice"].channels} == {Channel.LEXICAL}
    assert [h.chunk.chunk_id for h in result.hits][:2] == ["zh-1", "en-answer"]
    assert "lexical words translated for en pages: 发票 → invoice" in result.notes
    assert any("translated by dictionary" in note for note in result.notes)


def test_translations_are_shown_only_in_the_debug_report() -> None:
    translator = QueryTranslator(BilingualDictionary([Entry("发票", ("invoice",))]))
    result, _ = _retrieve(frozenset({"*"}), ("en", "zh-CN"), translator)
    assert not any("translated for en pages" in note for note in result.notes)


def test_nothing_is_translated_into_the_question_s_own_language() -> None:
    lexical = _Lexical()
    translator = QueryTranslator(BilingualDictionary([Entry("发票", ("invoice",))]))
    _retrieve(frozenset({"*"}), ("zh-CN", "zh-TW"), translator, lexical)
    assert lexical.searches == [(TextAnalyzer().plan("怎么申请发票").terms, "")]


def test_translated_hits_count_only_in_other_language_locales() -> None:
    vector = {"en": [_vector("en-a", "en")], "zh-CN": [_vector("zh-a", "zh-CN")]}
    translated = {"en": [_lexical("en-b", "en")], "zh-CN": [_lexical("zh-b", "zh-CN")]}
    fused, _ = fuse_locales(RrfFuser(), vector, [], "zh", None, translated)
    assert {h.chunk.chunk_id for h in fused} == {"zh-a", "en-a", "en-b"}


def test_one_translation_per_language_however_many_locale_tags_share_it() -> None:
    lexical, embedder = _Lexical(), _Embedder(frozenset({"*"}))
    translator = QueryTranslator(BilingualDictionary([Entry("发票", ("invoice",))]))
    result, vectors = _retrieve(
        frozenset({"*"}),
        ("en", "zh", "zh-CN"),
        translator,
        lexical,
        question="where is my invoice",
        embedder=embedder,
        query_language="en",
        debug=True,
    )
    # zh and zh-CN pages share one translated text and one embedding, and
    # one list: each vector searched in both tags.
    assert embedder.embedded == [["where is my invoice", "invoice 发票"]]
    assert [s.locale for s in vectors.scopes] == ["en", "zh", "zh-CN", "zh", "zh-CN"]
    translated = TextAnalyzer().plan("invoice 发票").terms
    assert lexical.searches[1:] == [(translated, "zh"), (translated, "zh-CN")]
    assert [n for n in result.notes if n.startswith("lexical words translated")] == [
        "lexical words translated for zh pages: invoice → 发票"
    ]
    assert any("ranked each locale apart (en, zh)" in note for note in result.notes)


# English pages under two tags: `en` holds the two best, `en-US` a weaker
# one; one Chinese page.
_REGION_PAGES = {
    "en": [("en-1", 0.9), ("en-2", 0.8)],
    "en-US": [("us-1", 0.7)],
    "zh-CN": [("zh-1", 0.6)],
}


class _RegionVectors(_Vectors):
    """`_REGION_PAGES`, filtered by locale."""

    def search(
        self, vector: object, limit: int, scope: ScopeFilter, deadline: object = None
    ) -> list[ScoredChunk]:
        self.scopes.append(scope)
        tags = [scope.locale] if scope.locale else list(_REGION_PAGES)
        hits = [_scored_in(cid, tag, score) for tag in tags for cid, score in _REGION_PAGES[tag]]
        return sorted(hits, key=lambda h: -h.score)


def _scored_in(chunk_id: str, locale: str, score: float) -> ScoredChunk:
    return replace(_vector(chunk_id, locale), score=score)


def test_the_tags_of_one_language_are_one_list_and_take_no_turns_from_each_other() -> None:
    """Ranked per tag, the en-US list's best page took the second place
    whatever its score; as one English list it follows the better en page."""
    vectors = _RegionVectors()
    result, _ = _retrieve(
        frozenset({"*"}),
        ("en", "en-US", "zh-CN"),
        question="where is my invoice",
        vectors=vectors,
        debug=True,
    )
    # Per tag the order was en-1, us-1, zh-1, en-2.
    assert [h.chunk.chunk_id for h in result.hits] == ["en-1", "zh-1", "en-2", "us-1"]
    assert [s.locale for s in vectors.scopes] == ["en", "en-US", "zh-CN"]
    assert vectors.batches == [3]  # every tag's search in one store call
    assert any("ranked each locale apart (en, zh-CN)" in note for note in result.notes)


def test_a_scope_of_one_language_under_two_tags_is_ranked_as_one_list() -> None:
    vectors = _RegionVectors()
    result, _ = _retrieve(
        frozenset({"*"}), ("en", "en-US"), question="where is my invoice", vectors=vectors
    )
    assert [s.locale for s in vectors.scopes] == [""]
    assert [h.chunk.chunk_id for h in result.hits][:3] == ["en-1", "en-2", "us-1"]
    assert not any("locale apart" in note for note in result.notes)


def test_locales_come_from_the_request_s_scope() -> None:
    held = {"api": ["en"], "site": ["en", "zh-CN"]}

    def read(scope_ids, doc_ids, deadline):  # type: ignore[no-untyped-def]
        return sorted({loc for s in scope_ids or held for loc in held[s]})

    embedder = _Embedder(frozenset({"*"}))
    translator = QueryTranslator(BilingualDictionary([Entry("发票", ("invoice",))]))
    for scope, searched in (
        (ScopeFilter(scope_id="api"), [""]),
        (ScopeFilter(scope_id="site"), ["en", "en", "zh-CN"]),
    ):
        result, vectors = _retrieve(
            frozenset({"*"}), read, translator, embedder=embedder, scope=scope
        )
        assert [s.locale for s in vectors.scopes] == searched
        assert [s.scope_id for s in vectors.scopes] == [scope.scope_id] * len(searched)
        balanced = any("ranked each locale apart" in note for note in result.notes)
        assert balanced is (scope.scope_id == "site")
    # The English-only scope: the question alone, embedded once, not translated.
    assert embedder.embedded == [["怎么申请发票"], ["怎么申请发票", "invoice"]]


def test_a_locale_read_that_outlasts_its_deadline_ranks_one_list() -> None:
    """Fault injected: a manifest that does not answer. The read is bounded
    like a channel (its deadline passed to the manifest), the Retrieve does
    not wait for it and ranks one list."""
    released, given = threading.Event(), []

    def stuck(scope_ids, doc_ids, deadline):  # type: ignore[no-untyped-def]
        given.append(deadline)
        released.wait(10)
        return ["en", "zh-CN"]

    vectors = _Vectors()
    config = replace(RetrievalConfig(), channel_timeout_ms=200)
    with ThreadPoolExecutor(4) as executor:
        pipeline = _pipeline(executor, _Embedder(frozenset({"*"})), vectors, stuck, config=config)
        request = RetrievalRequest(query="怎么申请发票", rerank=False)
        result = asyncio.run(pipeline.retrieve(request, Deadline.within(30)))
        released.set()
    assert [s.locale for s in vectors.scopes] == [""]
    assert not any("locale apart" in note for note in result.notes)
    assert len(given) == 1 and given[0].remaining_s() <= 0.2
