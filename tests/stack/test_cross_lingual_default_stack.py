"""RAG_CROSS_LINGUAL_MODEL=auto, the default, through the real stack with the
packaged multilingual-e5-small: a new index gets mUSE's second vector, which
a bilingual scope searches and fuses; an index built without one opens
again without it (no re-index asked), and a one-locale request skips the
channel by rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.stack.test_cross_lingual_channel import PAGES, QUESTION
from tests.support.pages import markdown_pages
from tests.support.stack import BackgroundStack

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=20)]

AUTO = {"cross_lingual_model": "auto"}
NONE = {"cross_lingual_model": ""}


def _stack(data_dir: Path, embedder: Embedder, settings: dict[str, str]) -> BackgroundStack:
    return BackgroundStack(data_dir, embedder, indexer=settings, retriever=settings).start()


def _reports(reply: rpb.RetrieveResponse) -> dict[int, rpb.ChannelReport]:
    return {report.channel: report for report in reply.debug.channels}


def test_a_new_index_gets_the_cross_lingual_channel(tmp_path: Path, e5_embedder: Embedder) -> None:
    stack = _stack(tmp_path, e5_embedder, AUTO)
    try:
        assert stack.upsert(markdown_pages(PAGES)).counts.added == len(PAGES)
        reply = stack.retrieve(QUESTION, top_k=5, debug=True, max_chunks_per_document=1)
        assert not reply.degraded
        assert _reports(reply)[rpb.CHANNEL_CROSS_LINGUAL].status == rpb.CHANNEL_STATUS_OK
        [answer] = [hit for hit in reply.hits if hit.doc_id == "en/invoices.md"]
        assert rpb.CHANNEL_CROSS_LINGUAL in {match.channel for match in answer.channels}
        one = stack.retrieve(QUESTION, top_k=5, debug=True, filter=rpb.ScopeFilter(locale="en"))
        assert _reports(one)[rpb.CHANNEL_CROSS_LINGUAL].status == rpb.CHANNEL_STATUS_SKIPPED
    finally:
        stack.stop()


def test_an_index_built_without_it_opens_again_without_it(
    tmp_path: Path, e5_embedder: Embedder
) -> None:
    first = _stack(tmp_path, e5_embedder, NONE)
    try:
        assert first.upsert(markdown_pages(PAGES)).counts.added == len(PAGES)
    finally:
        first.stop()
    second = _stack(tmp_path, e5_embedder, AUTO)
    try:
        assert second.runtime is not None and second.runtime.cross_lingual is None
        reply = second.retrieve(QUESTION, top_k=5, debug=True)
        assert not reply.degraded and reply.hits
        assert rpb.CHANNEL_CROSS_LINGUAL not in _reports(reply)
    finally:
        second.stop()
