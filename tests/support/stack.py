"""The real embedded stack (Indexer + Retriever servers, real stores, real
model) running on its own event loop in a background thread, so tests can use
blocking gRPC stubs, grpcurl subprocesses and HTTP clients against it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import threading
import time
import warnings
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.embedding.embedder import Embedder
from services.indexer.app import IndexerApp
from services.indexer.settings import IndexerSettings
from services.reranker.app import RerankerApp
from services.reranker.settings import RerankerSettings
from services.retriever.app import RetrieverApp
from services.retriever.rerank_sizing import CandidateSizer
from services.retriever.settings import RetrieverSettings
from services.runtime.observability.telemetry import Telemetry
from services.runtime.parts import SharedParts, open_parts
from services.runtime.service import thread_stacks
from services.stack.embedded import EmbeddedStack, stack_parts
from services.storage.settings import StoreMode, StoreSettings
from tests.support.ports import free_port as free_port  # re-exported for the tests


def where_everything_is(loop: asyncio.AbstractEventLoop) -> str:
    """Every thread's stack and every task of `loop`, for a timeout's message."""
    parts = [f"--- thread {name}\n{stack}" for name, stack in thread_stacks().items()]
    for task in asyncio.all_tasks(loop):
        lines = io.StringIO()
        task.print_stack(file=lines)
        parts.append(f"--- task {task.get_name()}\n{lines.getvalue()}")
    return "\n".join(parts)


class BackgroundLoop:
    """An asyncio loop in a daemon thread; `run()` executes a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 120) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            # A hang is rare and unreproducible on demand: say where everything was.
            where = where_everything_is(self.loop)
            raise TimeoutError(f"not done in {timeout} s\n{where}") from None

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


NO_SECOND_VECTOR = {"cross_lingual_model": ""}


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
        telemetry: tuple[Telemetry, Telemetry] | None = None,
        cross_lingual: Embedder | None = None,
    ) -> None:
        """`telemetry`: the Indexer's and Retriever's (default: no listener,
        tracing off); `cross_lingual`: a shared cross-lingual model (both
        services' settings must then name it, `cross_lingual_model`)."""
        self.data_dir = data_dir
        self.embedder, self.cross_lingual = embedder, cross_lingual
        # No second vector unless a test names one (or "auto", the services'
        # default): loading mUSE in every stack would cost each test ~1 s and
        # 65 MB, and most tests are about other things. The default itself
        # runs in the stack processes (crash loops, gateway, deployment, `make
        # run`) and in tests/stack/test_cross_lingual_default_stack.py.
        indexer = {**NO_SECOND_VECTOR, **(indexer or {})}
        retriever = {**NO_SECOND_VECTOR, **(retriever or {})}
        self.indexer_settings = IndexerSettings(host="127.0.0.1", log_json=False, **indexer)
        self.retriever_settings = RetrieverSettings(
            host="127.0.0.1", log_json=False, reranker_addr=reranker_addr, **retriever
        )
        self.wrap_stores = wrap_stores
        self.telemetry = telemetry or (Telemetry("indexer"), Telemetry("retriever"))
        self.stack: EmbeddedStack | None = None
        self._parts: SharedParts | None = None
        self.rerankers: list[RerankerApp] = []  # stopped with the stack
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

    @property
    def runtime(self) -> SharedParts | None:
        """The shared parts (stores, embedder) the two apps run on (already
        while `wrap_stores` runs)."""
        return self._parts

    def store_settings(self) -> StoreSettings:
        """Where the stack keeps its stores: embedded, in `data_dir`."""
        return StoreSettings(data_dir=self.data_dir, store_mode=StoreMode.EMBEDDED)

    async def _start(self) -> None:
        stores = self.store_settings()
        config = stack_parts(self.indexer_settings, self.retriever_settings)
        parts = await asyncio.to_thread(
            open_parts, stores, config, self.embedder, self.cross_lingual
        )
        self._parts = parts
        if self.wrap_stores:  # fault injection: the apps run on the wrapped stores
            storage = parts.storage
            storage.vectors, storage.lexical = self.wrap_stores(storage.vectors, storage.lexical)
        indexer_telemetry, retriever_telemetry = self.telemetry
        self.stack = EmbeddedStack(
            IndexerApp(self.indexer_settings, parts, indexer_telemetry, port=0),
            RetrieverApp(self.retriever_settings, parts, retriever_telemetry, port=0),
            parts,
        )
        await self.stack.start()
        self.indexer_addr = f"127.0.0.1:{self.stack.indexer.server.port}"
        self.retriever_addr = f"127.0.0.1:{self.stack.retriever.server.port}"

    def stop(self) -> None:
        for channel in getattr(self, "_channels", []):
            channel.close()
        if self._loop:
            for reranker in self.rerankers:
                self._loop.run(reranker.stop())
        self.rerankers = []
        if self._loop and self.stack and not self._loop.run(self.stack.stop()):
            warnings.warn("a stop overran its budget: see app_stop_overran", stacklevel=2)
        if self._loop:
            self._loop.close()
        self.stack = None
        self._parts = None

    def start_reranker(
        self, settings: RerankerSettings, telemetry: Telemetry | None = None
    ) -> RerankerApp:
        """A real Reranker app on this stack's loop (grpc.aio objects belong to
        the loop that serves them), its model loaded (or not, when it cannot
        be), and the Retriever told at once whether it serves."""

        async def boot() -> RerankerApp:
            app = RerankerApp(settings, telemetry)
            await app.open_port()
            await app.load_model()
            return app

        assert self._loop is not None
        app: RerankerApp = self._loop.run(boot())
        self.rerankers.append(app)
        loaded = app.scorer.loaded
        assert self.recheck_reranker(until_serving=loaded) == loaded
        return app

    def recheck_reranker(self, until_serving: bool = True) -> bool:
        """Have the Retriever ask the Reranker's health now (tests that start
        their Reranker after the stack: the Retriever saw it absent at start
        and would otherwise wait out its re-check backoff)."""
        assert self._loop is not None and self.stack is not None
        health = self.stack.retriever.pipeline.steps.reranker_health
        assert health is not None, "no reranker configured"
        for _ in range(100 if until_serving else 1):
            if self._loop.run(health.probe()):
                return True
            time.sleep(0.1)  # the channel reconnects within its own backoff (≤ 2 s)
        return False

    def forget_rerank_cost(self) -> None:
        """Start the Retriever's candidate sizing afresh (services.retriever.
        rerank_sizing): tests that made its Reranker slow would otherwise leave
        it sending fewer candidates to the next test's. The margin it learnt
        to keep back after reranking starts afresh too."""
        assert self.stack is not None
        step = self.stack.retriever.pipeline.steps.rerank
        step.sizer = CandidateSizer()
        step.reserve.forget()

    def upsert(self, docs: list[ipb.Document], dry_run: bool = False) -> ipb.UpsertResponse:
        return self.indexer.Upsert(ipb.UpsertRequest(documents=docs, dry_run=dry_run), timeout=120)

    def retrieve(self, query: str, timeout: float = 30, **fields: Any) -> rpb.RetrieveResponse:
        return self.retriever.Retrieve(rpb.RetrieveRequest(query=query, **fields), timeout=timeout)
