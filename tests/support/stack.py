"""The real embedded stack (Indexer + Retriever servers, real stores, real
model) running on its own event loop in a background thread, so tests can use
blocking gRPC stubs, grpcurl subprocesses and HTTP clients against it."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc

from services.common.embedding import Embedder
from services.common.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.common.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.common.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.common.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.common.stores.settings import StoreMode, StoreSettings
from services.indexer.settings import IndexerSettings
from services.retriever.settings import RetrieverSettings
from services.stack.runtime import Runtime, open_runtime, start_indexer, start_retriever


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BackgroundLoop:
    """An asyncio loop in a daemon thread; `run()` executes a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class BackgroundStack:
    def __init__(
        self,
        data_dir: Path,
        embedder: Embedder,
        *,
        reranker_addr: str = "",
        retriever: dict[str, Any] | None = None,
        indexer: dict[str, Any] | None = None,
        wrap_stores: Callable[[Any, Any], tuple[Any, Any]] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.embedder = embedder
        self.indexer_settings = IndexerSettings(host="127.0.0.1", log_json=False, **(indexer or {}))
        self.retriever_settings = RetrieverSettings(
            host="127.0.0.1", log_json=False, reranker_addr=reranker_addr, **(retriever or {})
        )
        self.wrap_stores = wrap_stores
        self.runtime: Runtime | None = None
        self._loop: BackgroundLoop | None = None
        self.indexer_addr = self.retriever_addr = ""

    def start(self) -> BackgroundStack:
        self._loop = BackgroundLoop()
        self._loop.run(self._start())
        self._channels = [
            grpc.insecure_channel(a) for a in (self.indexer_addr, self.retriever_addr)
        ]
        self.indexer = indexer_pb2_grpc.IndexerStub(self._channels[0])
        self.retriever = retriever_pb2_grpc.RetrieverStub(self._channels[1])
        return self

    async def _start(self) -> None:
        stores = StoreSettings(data_dir=self.data_dir, store_mode=StoreMode.EMBEDDED)
        self.runtime = await asyncio.to_thread(
            open_runtime, stores, self.indexer_settings, self.retriever_settings, self.embedder
        )
        if self.wrap_stores:
            rt = self.runtime
            rt.storage.vectors, rt.storage.lexical = self.wrap_stores(rt.vectors, rt.lexical)
        indexer = await start_indexer(self.runtime, self.indexer_settings, 0)
        retriever = await start_retriever(self.runtime, self.retriever_settings, 0)
        self.indexer_addr = f"127.0.0.1:{indexer.port}"
        self.retriever_addr = f"127.0.0.1:{retriever.port}"

    def stop(self) -> None:
        for channel in getattr(self, "_channels", []):
            channel.close()
        if self._loop and self.runtime:
            self._loop.run(self.runtime.stop())
        if self._loop:
            self._loop.close()
        self.runtime = None

    def upsert(self, docs: list[ipb.Document], dry_run: bool = False) -> ipb.UpsertResponse:
        return self.indexer.Upsert(ipb.UpsertRequest(documents=docs, dry_run=dry_run), timeout=120)

    def retrieve(self, query: str, timeout: float = 30, **fields: Any) -> rpb.RetrieveResponse:
        return self.retriever.Retrieve(rpb.RetrieveRequest(query=query, **fields), timeout=timeout)
