"""The translated question's vector, deferred until the cross-lingual channel
has answered (services.retriever.fan_out `_translations_searched`): a locale
sure to wait (services.retriever.locale_order) is searched with the
question's vector alone, and its translation is not embedded; one that takes
turns gets it, as before (unit, stand-in model and stores)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from services.core.analysis.analyzer import TextAnalyzer
from services.core.analysis.bilingual_dictionary import BilingualDictionary, Entry
from services.core.analysis.query_translation import QueryTranslator
from services.core.deadline import Deadline
from services.core.models import ScopeFilter, ScoredChunk
from services.retriever.channels import ChannelStatus
from services.retriever.pipeline import RetrievalConfig, RetrievalPipeline, RetrievalRequest
from services.retriever.requests import RetrievalResult
from services.retriever.scope_locales import IndexLocales
from services.retriever.steps import LanguageCrossing, build_retrieval_steps
from services.retriever.translation_deferral import TranslationDeferral
from services.retriever.types import Channel
from services.storage.base import SECOND_VECTOR, VectorQuery
from services.storage.storage import Storage
from tests.retriever.factories import scored

pytestmark = pytest.mark.unit

QUESTION = "where do I find my invoice for last month"
TRANSLATED = "find invoice last month 发票"  # the dictionary's translation for zh pages
TRANSLATOR = QueryTranslator(BilingualDictionary([Entry("发票", ("invoice",))]))


class _Model:
    """Stands in for a model of every language; records each pass's texts."""

    dim = 3
    languages = frozenset({"*"})

    def __init__(self, fail_after: int | None = None) -> None:
        self.passes: list[list[str]] = []
        self.fail_after = fail_after  # fault injection: passes after this many raise

    def embed_query(self, text: str, deadline: float | None = None, *, partition: str = "") -> Any:
        return self.embed_queries([text])[0]

    def embed_queries(
        self, texts: list[str], deadline: float | None = None, *, partition: str = ""
    ) -> Any:
        if self.fail_after is not None and len(self.passes) >= self.fail_after:
            raise RuntimeError("model unavailable (injected)")
        self.passes.append(list(texts))
        # A translation (Chinese words in it) embeds elsewhere than a question.
        return np.asarray([[0, 1, 0] if "发票" in t else [1, 0, 0] for t in texts], np.float32)


class _Vectors:
    """Per locale: the first vector's pages, and the second vector's best cosine."""

    second_dim = 3

    def __init__(self, cross_lingual_best: dict[str, float]) -> None:
        self.cross_lingual_best = cross_lingual_best
        self.searched: list[tuple[str, str]] = []  # (locale, using) per query

    def search_many(self, queries: list[VectorQuery], deadline: object = None) -> Any:
        self.searched.extend((q.scope.locale, q.using) for q in queries)
        return [self._search(q) for q in queries]

    def _search(self, query: VectorQuery) -> list[ScoredChunk]:
        locale = query.scope.locale
        if query.using == SECOND_VECTOR:
            return [_hit(f"{locale}-x", locale, self.cross_lingual_best[locale])]
        if query.vector[1]:  # the translation's vector finds another page first
            return [_hit(f"{locale}-t", locale, 0.95), _hit(f"{locale}-2", locale, 0.7)]
        return [_hit(f"{locale}-{n}", locale, 0.9 - n / 10) for n in (1, 2)]


class _Lexical:
    analyzer = TextAnalyzer()

    def search_plan(self, plan: Any, limit: int, scope: ScopeFilter, deadline: Any = None) -> Any:
        return []

    def describe_query(self, query: str) -> str:
        return query


def _hit(chunk_id: str, locale: str, score: float) -> ScoredChunk:
    hit = scored(chunk_id, score)
    return replace(hit, chunk=replace(hit.chunk, locale=locale))


def _retrieve(
    cross_lingual_best: dict[str, float],
    model: _Model | None = None,
    questions: int = 1,
    **config: Any,
) -> tuple[RetrievalResult, _Model, _Vectors]:
    """`questions` asked one after another of one pipeline (the last one's
    answer); a scope's translations are deferred from the first question
    on unless `config` says otherwise."""
    model = model or _Model()
    vectors = _Vectors(cross_lingual_best)
    storage: Any = Storage(vectors, _Lexical(), None)  # type: ignore[arg-type]
    locales = IndexLocales(lambda *_: tuple(cross_lingual_best))
    crossing = LanguageCrossing(locales, TRANSLATOR, _Model())  # type: ignore[arg-type]
    config = {"translation_deferral_share": 0.0, **config}
    with ThreadPoolExecutor(2) as executor:
        steps = build_retrieval_steps(
            model,  # type: ignore[arg-type]
            storage,
            None,
            executor,
            replace(RetrievalConfig(), **config),
            crossing=crossing,
        )
        pipeline = RetrievalPipeline(steps)
        request = RetrievalRequest(query=QUESTION, rerank=False, debug=True, query_language="en")
        for _ in range(questions):
            result = asyncio.run(pipeline.retrieve(request, Deadline.within(10)))
    return result, model, vectors


def _embedding_note(result: RetrievalResult) -> str:
    return next(note for note in result.notes if note.startswith("query texts embedded"))


def test_a_locale_sure_to_wait_is_searched_with_the_question_alone() -> None:
    # zh's best cross-lingual cosine 0.5 below en's: its list will wait.
    result, model, vectors = _retrieve({"en": 0.7, "zh": 0.2})
    assert model.passes == [[QUESTION]]  # the translation was not embedded
    first = [(loc, using) for loc, using in vectors.searched if not using]
    assert first == [("en", ""), ("zh", "")]  # each locale once, with the question's vector
    assert "not embedded: into zh: its locales' lists wait" in _embedding_note(result)
    assert [h.chunk.chunk_id for h in result.hits][:2] == ["en-1", "en-2"]  # zh waits
    assert "translation" not in dict(result.timings)


def test_a_locale_that_takes_turns_gets_the_translation_s_vector() -> None:
    result, model, vectors = _retrieve({"en": 0.6, "zh": 0.45})
    assert model.passes == [[QUESTION], [TRANSLATED]]
    first = [loc for loc, using in vectors.searched if not using]
    assert first == ["en", "zh", "zh"]  # the question's searches, then the translation's
    assert _embedding_note(result) == "query texts embedded: 2 (the question, into zh)"
    assert [h.chunk.chunk_id for h in result.hits][:2] == ["en-1", "zh-1"]  # turns
    assert "translation" in dict(result.timings)


def test_when_another_language_may_lead_every_translation_is_embedded() -> None:
    # zh leads by the cross-lingual channel: whether en then waits depends on
    # the leading page's translations, which only the fused lists show.
    _, model, _ = _retrieve({"en": 0.2, "zh": 0.7})
    assert model.passes == [[QUESTION], [TRANSLATED]]


def test_without_waiting_the_question_and_its_translation_share_one_pass() -> None:
    _, model, _ = _retrieve({"en": 0.7, "zh": 0.2}, locale_wait_gap=2.0)
    assert model.passes == [[QUESTION, TRANSLATED]]
    _, model, _ = _retrieve({"en": 0.7, "zh": 0.2}, translation_deferral_share=2.0)
    assert model.passes == [[QUESTION, TRANSLATED]]


def test_a_translation_that_fails_leaves_the_question_s_hits_and_says_so() -> None:
    """Fault injected: the model fails on its second pass (the translation's)."""
    result, _, _ = _retrieve({"en": 0.6, "zh": 0.45}, _Model(fail_after=1))
    vector = next(o for o in result.channels if o.channel is Channel.VECTOR)
    assert vector.status is ChannelStatus.OK  # the question's searches answered
    assert (
        "into zh: not searched: ComponentError: RuntimeError: model unavailable"
        in _embedding_note(result)
    )
    assert {h.chunk.chunk_id for h in result.hits} >= {"en-1", "zh-1"}


def test_a_scope_defers_only_once_most_of_its_questions_skipped_their_translation() -> None:
    """The default share: a new scope embeds the question and its translation
    in one pass (the former behaviour) until enough of its verdicts said the
    translation was not needed."""
    share = RetrievalConfig().translation_deferral_share
    _, model, _ = _retrieve({"en": 0.7, "zh": 0.2}, questions=8, translation_deferral_share=share)
    together = [QUESTION, TRANSLATED]
    assert model.passes[:5] == [together] * 5  # share after n verdicts: 1 - 0.9^n
    assert model.passes[-1] == [QUESTION]  # 1 - 0.9^5 = 0.41 >= 0.4: deferred, not needed


def test_a_scope_whose_translations_take_turns_never_defers() -> None:
    share = RetrievalConfig().translation_deferral_share
    _, model, _ = _retrieve({"en": 0.6, "zh": 0.45}, questions=8, translation_deferral_share=share)
    assert model.passes == [[QUESTION, TRANSLATED]] * 8


def test_the_running_share_is_kept_per_scope_and_for_a_bounded_number_of_scopes() -> None:
    deferral = TranslationDeferral(threshold=0.5, weight=0.5, max_scopes=2)
    deferral.observe("a", True)
    assert deferral.defers("a") and not deferral.defers("b")
    deferral.observe("a", False)
    assert not deferral.defers("a")  # 0.5 -> 0.25
    deferral.observe("b", True)
    deferral.observe("c", True)
    assert not deferral.defers("a")  # the oldest scope was let go
    assert deferral.defers("b") and deferral.defers("c")


def test_a_waiting_locale_is_ranked_the_same_whether_its_translation_was_embedded_or_not() -> None:
    """Its list follows every other; ranked by the question's vector alone
    either way, so a page token sees one ranking from page to page
    whatever the scope's running share decides."""
    deferred, _, _ = _retrieve({"en": 0.7, "zh": 0.2})
    together, model, _ = _retrieve({"en": 0.7, "zh": 0.2}, translation_deferral_share=2.0)
    assert model.passes == [[QUESTION, TRANSLATED]]  # embedded, and searched, in one pass
    ranked = [h.chunk.chunk_id for h in together.hits]
    assert ranked == [h.chunk.chunk_id for h in deferred.hits]
    assert "zh-t" not in ranked and ranked.index("zh-1") > ranked.index("en-2")


def test_a_locale_that_takes_turns_gets_the_translation_s_hits() -> None:
    result, _, _ = _retrieve({"en": 0.6, "zh": 0.45})
    ranked = [h.chunk.chunk_id for h in result.hits]
    assert ranked[:4] == ["en-1", "zh-1", "en-2", "zh-t"], ranked  # turns; zh: both vectors
