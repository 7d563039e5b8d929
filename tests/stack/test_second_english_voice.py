"""An English second model (RAG_CROSS_LINGUAL_MODEL=packaged:bge-small-en)
through the real stack: it is searched as a second voice for an English
question, over the English pages only, in a scope of one locale as in one of
two; it is left out, with the reason, for a Chinese question. The first model
is the packaged MiniLM, the second the real bge-small-en."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.bge_runtime import ALIAS
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from tests.stack.test_cross_lingual_channel import PAGES as CROSS_LINGUAL_PAGES
from tests.support.pages import markdown_pages
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

SECOND = {"cross_lingual_model": ALIAS}
# The cross-lingual channel's pages (no tide table), and the invoices page in Chinese.
PAGES = {
    **{path: text for path, text in CROSS_LINGUAL_PAGES.items() if path != "en/tides.md"},
    "zh-CN/invoices.md": "# 发票\n\n发票在每月第一天开具，三天后从绑定的银行卡扣款。",
}


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(
        tmp_path_factory.mktemp("second-english-voice"),
        embedder,
        indexer=SECOND,
        retriever=SECOND,
        cross_lingual=Embedder(EmbedderConfig(model=ALIAS)),
    ).start()
    reply = stack.upsert(markdown_pages(PAGES))
    assert reply.counts.added == len(PAGES)
    yield stack
    stack.stop()


def _reports(reply: rpb.RetrieveResponse) -> dict[int, rpb.ChannelReport]:
    return {report.channel: report for report in reply.debug.channels}


def _second_voice(reply: rpb.RetrieveResponse) -> list[str]:
    """The pages the second model's channel found, in rank order."""
    return [
        hit.doc_id
        for hit in reply.hits
        if rpb.CHANNEL_CROSS_LINGUAL in {match.channel for match in hit.channels}
    ]


@pytest.mark.parametrize("locale", ["", "en"], ids=["two locales", "english only"])
def test_an_english_question_hears_the_second_voice_over_english_pages(
    stack: BackgroundStack, locale: str
) -> None:
    reply = stack.retrieve(
        "When is my card charged for the monthly bill?",
        top_k=5,
        debug=True,
        max_chunks_per_document=1,
        filter=rpb.ScopeFilter(locale=locale),
    )
    assert not reply.degraded
    assert reply.hits[0].doc_id == "en/invoices.md"
    assert _reports(reply)[rpb.CHANNEL_CROSS_LINGUAL].status == rpb.CHANNEL_STATUS_OK
    heard = _second_voice(reply)
    assert heard[0] == "en/invoices.md"
    assert all(doc_id.startswith("en/") for doc_id in heard)


def test_a_chinese_question_leaves_the_english_model_out_and_says_why(
    stack: BackgroundStack,
) -> None:
    reply = stack.retrieve("发票什么时候扣款？", top_k=5, debug=True)
    report = _reports(reply)[rpb.CHANNEL_CROSS_LINGUAL]
    assert report.status == rpb.CHANNEL_STATUS_SKIPPED
    assert report.error == "the second model reads en only; the question reads as zh"
    assert reply.hits[0].doc_id == "zh-CN/invoices.md"
    assert not _second_voice(reply)


def test_a_scope_of_chinese_pages_leaves_the_english_model_out(stack: BackgroundStack) -> None:
    reply = stack.retrieve("invoice", top_k=5, debug=True, filter=rpb.ScopeFilter(locale="zh-CN"))
    report = _reports(reply)[rpb.CHANNEL_CROSS_LINGUAL]
    assert report.status == rpb.CHANNEL_STATUS_SKIPPED
    assert report.error == "the second model reads en only; the scope holds zh-CN"
