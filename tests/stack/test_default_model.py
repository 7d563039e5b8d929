"""The stack as an operator starts it, with no model configured, runs the
multilingual default: a Chinese question keeps its vector channel, and the
index records the model and its prompts."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.embedding.config import MULTILINGUAL_MODEL
from services.runtime.healthcheck import wait_until_serving
from tests.stack.support import start_stack
from tests.support.stack import free_port

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=8)]


def test_the_default_model_reads_chinese_questions(tmp_path: Path) -> None:
    ports = {"RAG_INDEXER_PORT": free_port(), "RAG_RETRIEVER_PORT": free_port()}
    env = {k: v for k, v in os.environ.items() if k != "RAG_EMBEDDING_MODEL"}
    env.update({k: str(v) for k, v in ports.items()})
    env.update({"RAG_DATA_DIR": str(tmp_path), "RAG_RERANKER_ADDR": ""})
    proc = start_stack(env, quiet=True)
    try:
        assert wait_until_serving(f"127.0.0.1:{ports['RAG_RETRIEVER_PORT']}", timeout_s=300)
        with (
            grpc.insecure_channel(f"127.0.0.1:{ports['RAG_INDEXER_PORT']}") as indexer,
            grpc.insecure_channel(f"127.0.0.1:{ports['RAG_RETRIEVER_PORT']}") as retriever,
        ):
            _ask(indexer_pb2_grpc.IndexerStub(indexer), retriever_pb2_grpc.RetrieverStub(retriever))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def _ask(
    indexer: indexer_pb2_grpc.IndexerStub, retriever: retriever_pb2_grpc.RetrieverStub
) -> None:
    pages = {
        "en/invoices.md": "# Invoices\n\nInvoices are issued on the first day of each month.",
        "zh-CN/limits.md": "# 限流\n\n每个项目每分钟最多发送六百个请求。",
    }
    docs = [
        ipb.Document(
            doc_id=path,
            scope_id="site",
            locale=path.split("/")[0],
            title=text.splitlines()[0].lstrip("# "),
            text=text,
            content_type=ipb.CONTENT_TYPE_MARKDOWN,
        )
        for path, text in pages.items()
    ]
    assert indexer.Upsert(ipb.UpsertRequest(documents=docs), timeout=300).counts.added == 2
    stats = indexer.Stats(ipb.StatsRequest(), timeout=30)
    assert stats.embedding_model == MULTILINGUAL_MODEL
    reply = retriever.Retrieve(rpb.RetrieveRequest(query="发票什么时候开", debug=True), timeout=30)
    vector = [c for c in reply.debug.channels if c.channel == rpb.CHANNEL_VECTOR]
    assert vector and vector[0].status == rpb.CHANNEL_STATUS_OK
    assert "en/invoices.md" in [hit.doc_id for hit in reply.hits]
