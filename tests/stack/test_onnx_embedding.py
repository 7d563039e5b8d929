"""The embedded stack with the ONNX Runtime embedding path: the settings
reach the Embedder, and Retrieve works end to end on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.errors import ConfigError
from services.embedding.embedder import Embedder
from services.indexer.settings import IndexerSettings
from services.retriever.app import retriever_parts
from services.retriever.settings import RetrieverSettings
from services.runtime.parts import ONNX_CACHE_SUBDIR
from services.stack.embedded import stack_parts
from tests.support.corpus import corpus_documents, url_of
from tests.support.stack import BackgroundStack, free_port

QUESTIONS = ["keep my daemon alive when it dies", "how are rate limits enforced", "X7Q-4291"]


@pytest.fixture(scope="module")
def onnx_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundStack]:
    data_dir = tmp_path_factory.mktemp("onnx-stack")
    # fp32 documents, as the torch stack's: this compares backends, not precisions
    # (RAG_EMBEDDING_DOCUMENT_PRECISION=auto is int8 on a CPU with VNNI).
    indexer = IndexerSettings(embedding_backend="onnx", embedding_document_precision="fp32")
    config = stack_parts(indexer, RetrieverSettings(embedding_backend="onnx")).embedder_config(
        data_dir
    )
    stack = BackgroundStack(
        data_dir, Embedder(config), reranker_addr=f"127.0.0.1:{free_port()}"
    ).start()
    stack.upsert(corpus_documents())
    yield stack
    stack.stop()


def vector_order(stack: BackgroundStack, question: str) -> list[str]:
    reply = stack.retrieve(question, top_k=5, channels=[rpb.CHANNEL_VECTOR])
    return [hit.url for hit in reply.hits]


@pytest.mark.unit
def test_settings_select_the_backend_and_a_cache_under_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAG_EMBEDDING_CACHE_DIR", raising=False)  # the suite shares one
    settings = RetrieverSettings(embedding_backend="onnx", query_max_batch=8)
    config = retriever_parts(settings).embedder_config(tmp_path)
    assert (config.backend, config.query_max_batch) == ("onnx", 8)
    assert config.onnx_cache_dir == tmp_path / ONNX_CACHE_SUBDIR


@pytest.mark.unit
def test_indexer_and_retriever_must_embed_alike(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="RAG_EMBEDDING_BACKEND differs"):
        stack_parts(
            IndexerSettings(embedding_backend="torch"), RetrieverSettings(embedding_backend="onnx")
        )


@pytest.mark.integration
def test_retrieve_runs_on_the_onnx_embedder(onnx_stack: BackgroundStack) -> None:
    assert onnx_stack.embedder.backend == "onnx"
    reply = onnx_stack.retrieve(
        "keep my daemon alive when it dies", top_k=3, candidates_per_channel=5, debug=True
    )
    supervisor = next(hit for hit in reply.hits if hit.url == url_of("supervisor.md"))
    assert {m.channel: m.rank for m in supervisor.channels}[rpb.CHANNEL_VECTOR] == 1
    assert {d.component for d in reply.degraded} <= {"reranker"}  # no reranker in this stack
    assert onnx_stack.embedder.query_stats().queries >= 1


@pytest.mark.integration
def test_onnx_and_torch_stacks_rank_vectors_alike(
    onnx_stack: BackgroundStack, embedded_stack: BackgroundStack
) -> None:
    for question in QUESTIONS:
        assert vector_order(onnx_stack, question) == vector_order(embedded_stack, question)
