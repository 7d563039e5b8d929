"""Retriever + the real Reranker serving the packaged cross-encoder
(ms-marco-MiniLM-L-12-v2, English): it puts the answering passage first where
fusion alone does not, and what it cannot read (a Chinese question, Chinese
passages) keeps its fused place, the answer saying how many and why. With
the Retriever's own rule (the fitted blend behind its gate), a first hit the
model agrees with keeps its place, and the answer says the gate kept it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.embedding.embedder import Embedder
from services.retriever.settings import RetrieverSettings
from tests.reranker.stack import start_reranked_stack
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

SCOPE = "city"
QUESTION = "How many people live in Berlin?"
ANSWER = "berlin-population"
# (doc_id, locale, title, text). The distractors repeat the question's words;
# the answer says it with others ("residents", "inhabitants").
DOCUMENTS = [
    (
        "berlin-visitors",
        "en",
        "How many people visit Berlin",
        "How many people visit Berlin each year? People who live in Berlin often ask how many "
        "people come to see the city. Many people visit Berlin in summer.",
    ),
    (
        "berlin-museums",
        "en",
        "Berlin museums for people who live in Berlin",
        "People who live in Berlin have many museums nearby. How many museums? It depends on "
        "what you count as a museum.",
    ),
    (
        ANSWER,
        "en",
        "Census figures",
        "Berlin had about 3.7 million registered inhabitants at the 2023 census, the most "
        "populous city in the European Union.",
    ),
    (
        "berlin-living",
        "en",
        "Living in Berlin",
        "People who live in Berlin say the city is green: how many parks, how many lakes, how "
        "many people on bicycles.",
    ),
    (
        "munich",
        "en",
        "Munich",
        "Munich, the capital of Bavaria, has about 1.5 million inhabitants.",
    ),
    (
        "berlin-transport",
        "en",
        "Getting around Berlin",
        "Berlin's buses, trams and trains carry people across the city day and night.",
    ),
    # Chinese pages naming Berlin in Latin letters too, so the English question reaches them.
    (
        "berlin-zh",
        "zh",
        "Berlin 柏林人口",
        "柏林（Berlin）约有三百七十万居民，是欧盟人口最多的城市。很多人住在柏林。",
    ),
    (
        "berlin-transport-zh",
        "zh",
        "Berlin 柏林交通",
        "柏林（Berlin）的公共汽车、有轨电车和火车每天运送很多人。",
    ),
]


def documents() -> list[ipb.Document]:
    return [
        ipb.Document(
            doc_id=doc_id,
            url=f"https://city.example/{doc_id}",
            title=title,
            locale=locale,
            scope_id=SCOPE,
            text=text,
            content_type=ipb.CONTENT_TYPE_TEXT,
        )
        for doc_id, locale, title, text in DOCUMENTS
    ]


def reranked_stack(root: Path, embedder: Embedder, retriever: dict[str, object]) -> BackgroundStack:
    """A stack whose Reranker serves the default model (the packaged
    cross-encoder), the test corpus indexed; `retriever`: its rerank settings.
    Every budget here is one no loaded machine exhausts: these tests are about
    order, not time."""
    stack, _ = start_reranked_stack(root, embedder, retriever=retriever, documents=documents())
    return stack


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    # The reranker's own order (fused weight 0, no gate), so these tests pin what
    # the model reads and where it is not asked; the default rule has its own.
    rule = {"rerank_fused_weight": 0.0, "rerank_gate_margin": 0.0, "rerank_candidates": 20}
    root = tmp_path_factory.mktemp("packaged-rerank")
    stack = reranked_stack(root, embedder, {**rule, "rerank_budget_ms": 60_000})
    yield stack
    stack.stop()


def doc_ids(reply: object) -> list[str]:
    return [hit.doc_id for hit in reply.hits]  # type: ignore[attr-defined]


def test_reranking_puts_the_answer_first_where_fusion_does_not(stack: BackgroundStack) -> None:
    fused = stack.retrieve(QUESTION, top_k=10, disable_rerank=True)
    reply = stack.retrieve(QUESTION, top_k=10, timeout=120)
    assert doc_ids(fused)[0] != ANSWER, doc_ids(fused)
    assert reply.rerank.used, reply.rerank.reason
    assert reply.rerank.model == "packaged:ms-marco-MiniLM-L-12-v2"
    assert doc_ids(reply)[0] == ANSWER, (doc_ids(fused), doc_ids(reply))


def test_chinese_candidates_keep_their_fused_places(stack: BackgroundStack) -> None:
    fused = doc_ids(stack.retrieve(QUESTION, top_k=10, disable_rerank=True))
    reply = stack.retrieve(QUESTION, top_k=10, timeout=120)
    chinese = [doc for doc in fused if doc.endswith("-zh")]
    assert chinese, "the question should reach the Chinese pages too"
    for doc in chinese:
        assert doc_ids(reply).index(doc) == fused.index(doc)
    assert reply.rerank.reranked == len(fused) - len(chinese)
    assert f"{len(chinese)} of {len(fused)} candidates not scored" in reply.rerank.reason
    assert "it reads en" in reply.rerank.reason


def test_a_chinese_question_is_not_reordered_by_an_english_model(stack: BackgroundStack) -> None:
    question = "柏林有多少居民？"
    fused = stack.retrieve(question, top_k=10, disable_rerank=True)
    reply = stack.retrieve(question, top_k=10, timeout=120)
    assert len(fused.hits) >= 2
    assert doc_ids(reply) == doc_ids(fused)
    assert not reply.rerank.used and not reply.rerank.fallback and not reply.degraded
    assert reply.rerank.reason.startswith("not reranked: the question is in zh")


@pytest.fixture(scope="module")
def default_rule_stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    """The Retriever's own rerank rule (candidates, blend, gate)."""
    root = tmp_path_factory.mktemp("packaged-rerank-default")
    stack = reranked_stack(root, embedder, {"rerank_budget_ms": 60_000})
    yield stack
    stack.stop()


def test_the_default_rule_keeps_a_first_hit_the_reranker_agrees_with_and_says_so(
    default_rule_stack: BackgroundStack,
) -> None:
    question = "What is the population of Berlin?"
    fused = doc_ids(default_rule_stack.retrieve(question, top_k=10, disable_rerank=True))
    reply = default_rule_stack.retrieve(question, top_k=10, timeout=120)
    assert fused[0] == ANSWER, fused
    assert doc_ids(reply) == fused  # the gate stayed shut: nothing was reordered
    assert reply.rerank.used and not reply.degraded
    # The default reads the first few candidates; Chinese pages among them are not read.
    sent = fused[: RetrieverSettings().rerank_candidates]
    assert reply.rerank.reranked == len([doc for doc in sent if not doc.endswith("-zh")])
    assert reply.rerank.reason.startswith("fused order kept: the reranker's best score beats")
    scores = {hit.doc_id: hit.rerank_score for hit in reply.hits if hit.reranked}
    assert max(scores, key=scores.__getitem__) == ANSWER  # the model agrees with fusion
