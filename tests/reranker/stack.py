"""A BackgroundStack whose Retriever calls a real Reranker app, for tests of
what the Reranker does to a Retrieve (and of what it exports on the way)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.embedding.embedder import Embedder
from services.reranker.app import RerankerApp
from services.reranker.settings import RerankerSettings
from services.runtime.observability.telemetry import Telemetry
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundStack, free_port


def start_reranked_stack(
    root: Path,
    embedder: Embedder,
    model: str | None = None,
    *,
    documents: list[ipb.Document] | None = None,
    retriever: dict[str, Any] | None = None,
    telemetry: tuple[Telemetry, Telemetry] | None = None,
    reranker_telemetry: Telemetry | None = None,
    reranker: dict[str, Any] | None = None,
) -> tuple[BackgroundStack, RerankerApp]:
    """The stack and its Reranker (on a free port, serving `model`, else the
    packaged default, with `reranker` settings), with `documents` indexed
    (default: the test corpus); `retriever` and `telemetry` as
    BackgroundStack takes them."""
    port = free_port()
    stack = BackgroundStack(
        root / "data",
        embedder,
        reranker_addr=f"127.0.0.1:{port}",
        retriever=retriever,
        telemetry=telemetry,
    ).start()
    chosen: dict[str, Any] = {"rerank_model": model} if model is not None else {}
    chosen.update(reranker or {})
    settings = RerankerSettings(
        host="127.0.0.1",
        reranker_port=port,
        rerank_cache_dir=root / "cache",
        log_json=False,
        **chosen,
    )
    app = stack.start_reranker(settings, reranker_telemetry)
    stack.upsert(corpus_documents() if documents is None else documents)
    return stack, app
