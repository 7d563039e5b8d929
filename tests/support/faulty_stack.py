"""The real stack with faults injected around its parts (test-only): the
embedder, both stores and a stand-in Reranker. Shared by the Retriever's
degradation matrix and the gateway's degradation codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.embedding.embedder import Embedder
from services.runtime.server import GrpcServer, ServerOptions
from tests.support.corpus import corpus_documents
from tests.support.faults import OK, FaultySearch, RerankerInjector
from tests.support.stack import BackgroundStack, free_port


class Faults:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = FaultySearch(embedder, ["embed_query", "embed_queries"])
        self.vectors: FaultySearch | None = None
        self.lexical: FaultySearch | None = None
        self.reranker = RerankerInjector()

    def wrap(self, vectors: Any, lexical: Any) -> tuple[Any, Any]:
        self.vectors = FaultySearch(vectors, ["search", "search_many", "ping"])
        self.lexical = FaultySearch(lexical, ["search", "search_plan", "ping", "count"])
        return self.vectors, self.lexical

    def set(self, part: str, mode: str) -> None:
        if part == "reranker":
            self.reranker.mode = mode
        else:
            getattr(self, part).mode = mode

    def reset(self) -> None:
        for part in (self.embedder, self.vectors, self.lexical):
            assert part is not None
            part.mode = OK
        self.reranker.mode = "reverse"


async def serve_injector(injector: RerankerInjector, port: int) -> GrpcServer:
    """grpc.aio servers must be created on the loop they serve from."""
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=port), ["rag.reranker.v1.Reranker"])
    reranker_pb2_grpc.add_RerankerServicer_to_server(injector, server.server)
    await server.start()
    await server.set_serving(True)
    return server


@contextmanager
def faulty_stack(data_dir: Path, embedder: Embedder) -> Iterator[tuple[Faults, BackgroundStack]]:
    """The stack with the test corpus, a short rerank budget and channel timeout."""
    faults = Faults(embedder)
    port = free_port()
    stack = BackgroundStack(
        data_dir,
        faults.embedder,  # type: ignore[arg-type]
        reranker_addr=f"127.0.0.1:{port}",
        wrap_stores=faults.wrap,
        # The channel timeout leaves room for a loaded 2-core CI machine: a
        # healthy channel must never time out, while a HANG (2 s) always does.
        # Order by the (injected) reranker alone: the tests read its order
        # back; the fitted blend with the fused rank has tests of its own.
        retriever={
            "rerank_candidates": 20,
            "rerank_budget_ms": 200,
            "channel_timeout_ms": 1000,
            "rerank_fused_weight": 0.0,
            "rerank_gate_margin": 0.0,
        },
    ).start()
    assert stack._loop is not None
    reranker = stack._loop.run(serve_injector(faults.reranker, port))
    assert stack.recheck_reranker()
    stack.upsert(corpus_documents())
    try:
        yield faults, stack
    finally:
        stack._loop.run(reranker.stop())
        stack.stop()
