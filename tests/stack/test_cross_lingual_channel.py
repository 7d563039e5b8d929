"""The cross-lingual channel through the real stack: with an English-only
first model (MiniLM, which leaves a Chinese question's vector channel out)
and mUSE as the second model, a Chinese question's answer that exists only
on an English page reaches the top 3 through the second vector, where
without the channel nothing can reach it (Chinese words never match English
pages lexically). The hit says which channel found it; the channel report
lists it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.support.pages import markdown_pages
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

CROSS_LINGUAL = {"cross_lingual_model": "packaged:muse-v3"}
PAGES = {
    "en/invoices.md": "# Invoices\n\nInvoices are issued on the first day of each month and "
    "charged to the card on file three days later. You can download every invoice as a PDF "
    "from the Billing page of the console.",
    "en/rate-limits.md": "# Rate limits\n\nEach project may send 600 requests a minute. A "
    "request over the limit is refused with HTTP 429 and may be retried after a pause.",
    "en/api-keys.md": "# API keys\n\nCreate a key in the console and send it in the "
    "Authorization header. Keys expire after one year unless they are renewed.",
    "en/tides.md": "# Tide tables\n\nThe harbour publishes tide tables for the coming week "
    "every Sunday evening.",
    "zh-CN/private-deployment.md": "# 私有化部署\n\n私有化部署至少需要三台服务器：两台运行检索"
    "服务，一台用作网关。所有服务器都必须能够访问同一个对象存储。",
    "zh-CN/team-members.md": "# 团队成员\n\n管理员可以邀请新成员加入团队，并为每位成员分配只读、"
    "编辑或管理员角色。成员离职时，由管理员转交其项目。",
}
QUESTION = "发票什么时候开，在哪里下载？"  # answered only by en/invoices.md


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, muse_embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(
        tmp_path_factory.mktemp("cross-lingual"),
        embedder,
        indexer=CROSS_LINGUAL,
        retriever=CROSS_LINGUAL,
        cross_lingual=muse_embedder,
    ).start()
    reply = stack.upsert(markdown_pages(PAGES))
    assert reply.counts.added == len(PAGES)
    yield stack
    stack.stop()


def _ranked(reply: rpb.RetrieveResponse) -> list[str]:
    return [hit.doc_id for hit in reply.hits]


def test_the_english_answer_reaches_the_top_3_through_the_channel(stack: BackgroundStack) -> None:
    reply = stack.retrieve(QUESTION, top_k=5, debug=True, max_chunks_per_document=1)
    assert not reply.degraded
    assert "en/invoices.md" in _ranked(reply)[:3]
    [answer] = [hit for hit in reply.hits if hit.doc_id == "en/invoices.md"]
    found_by = {match.channel for match in answer.channels}
    assert rpb.CHANNEL_CROSS_LINGUAL in found_by
    reports = {report.channel: report for report in reply.debug.channels}
    assert reports[rpb.CHANNEL_CROSS_LINGUAL].status == rpb.CHANNEL_STATUS_OK


def test_without_the_channel_the_english_answer_is_out_of_reach(stack: BackgroundStack) -> None:
    channels = [rpb.CHANNEL_VECTOR, rpb.CHANNEL_LEXICAL]
    reply = stack.retrieve(QUESTION, top_k=5, channels=channels, max_chunks_per_document=1)
    assert "en/invoices.md" not in _ranked(reply)[:3]


def test_an_english_question_still_ranks_its_own_answer_first(stack: BackgroundStack) -> None:
    reply = stack.retrieve("When is my card charged for the monthly invoice?", top_k=3)
    assert _ranked(reply)[0] == "en/invoices.md"
