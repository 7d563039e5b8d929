"""The other language's page ranked FIRST for a question only it answers,
through the real stack with the packaged multilingual model, on pages of
the bilingual set (bench/datasets/bilingual): the locale order by evidence
(services.retriever.locale_order) lets the Chinese locale lead the turns
when its best page stands clearly above the best English one, and the
answer's notes say so. Under the former rule (the question's language
always first) such an answer was second at best. The questions are the
set's `cross_en_zh` queries on synonyms and reranking (first); id-154 (second
since a question weighs the vector channel 3) and id-172 (below the margin)
are kept as strict xfails. A Chinese question answered by a Chinese page
keeps its own language first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.common.paths import DATASETS_DIR
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.embedding.embedder import Embedder
from tests.support.pages import markdown_pages
from tests.support.stack import BackgroundStack

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=16)]

PAGES_DIR = DATASETS_DIR / "bilingual" / "pages"
# Every page of the set (41 pages, ~190 chunks), as `bench.eval.bilingual`
# indexes them: the evidence rule weighs each locale's best page, so a
# sample changes the outcome (measured: with 11 of the pages,
# en/troubleshooting-faq.md led both English questions below; with all of
# them the Chinese answer is first, as in the evaluation).
PAGE_IDS = tuple(sorted(str(path.relative_to(PAGES_DIR)) for path in PAGES_DIR.rglob("*.md")))


@pytest.fixture(scope="module")
def bilingual_pages_stack(
    tmp_path_factory: pytest.TempPathFactory, e5_embedder: Embedder
) -> Iterator[BackgroundStack]:
    pages = {doc_id: (PAGES_DIR / doc_id).read_text(encoding="utf-8") for doc_id in PAGE_IDS}
    # A generous channel timeout: on a loaded machine a slow vector search
    # would degrade the answer, and this test is about order, not time.
    settings = {"channel_timeout_ms": 30_000, "default_deadline_ms": 60_000}
    stack = BackgroundStack(
        tmp_path_factory.mktemp("locale-order"), e5_embedder, retriever=settings
    ).start()
    # Upsert with a long timeout: embedding the pages on a loaded machine may
    # take longer than the helper's two minutes.
    request = ipb.UpsertRequest(documents=markdown_pages(pages))
    reply = stack.indexer.Upsert(request, timeout=1200)
    assert reply.counts.added == len(pages)
    yield stack
    stack.stop()


def _answer(stack: BackgroundStack, question: str) -> tuple[list[str], list[str]]:
    reply = stack.retrieve(question, 120, top_k=5, debug=True, max_chunks_per_document=1)
    assert not reply.degraded
    return [hit.doc_id for hit in reply.hits], list(reply.debug.notes)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (
            "how do I make a query for a nickname also match pages that use the official "
            "product name",
            "zh-CN/synonyms.md",
        ),
        pytest.param(
            "turning on reordering made my results worse, what is the usual cause",
            "zh-CN/rerank.md",
            # First until chunks opening with a heading were embedded under
            # their parents' titles (struct-v4): this stack has no
            # cross-lingual model, and the Chinese head's e5 evidence (0.888
            # + lexical) now clears the English one (0.854 + lexical) by 0.034,
            # below the fitted margin 0.04. With the default cross-lingual
            # model (mUSE) the Chinese page is first, as in the bilingual
            # set's evaluation. Strict: fails once first.
            marks=pytest.mark.xfail(strict=True, reason="below the fitted margin under struct-v4"),
        ),
        pytest.param(
            "can we run the on-prem edition without any graphics cards",
            "zh-CN/private-deployment.md",
            # First under equal channel weights; a question now weighs the
            # vector channel 3, so the English head is the page the model
            # puts closest (en/billing.md, cosine 0.821), which the Chinese
            # answer (0.782 + lexical) does not pass. Strict: fails once first.
            marks=pytest.mark.xfail(strict=True, reason="the model ranks an English page closer"),
        ),
        pytest.param(
            "will image-only photocopies of paper forms be ingested",
            "zh-CN/document-parsing.md",
            # Measured: the Chinese page is second, after en/troubleshooting-faq.md;
            # its evidence does not clear the fitted margin. Strict: fails once first.
            marks=pytest.mark.xfail(strict=True, reason="below the fitted margin"),
        ),
    ],
)
def test_an_english_question_answered_only_in_chinese_gets_the_chinese_page_first(
    bilingual_pages_stack: BackgroundStack, question: str, answer: str
) -> None:
    ranked, notes = _answer(bilingual_pages_stack, question)
    assert ranked[0] == answer, (ranked, notes)
    assert any("zh-CN leads (another language) by evidence" in note for note in notes), notes


def test_a_question_answered_in_its_own_language_keeps_that_language_first(
    bilingual_pages_stack: BackgroundStack,
) -> None:
    ranked, notes = _answer(bilingual_pages_stack, "私有化部署最少要几台服务器")
    assert ranked[0] == "zh-CN/private-deployment.md", (ranked, notes)
    assert any("zh-CN leads (question's language)" in note for note in notes), notes
