"""Build the Retriever from settings (shared by `services.retriever` and the embedded stack)."""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import Executor

from services.common.embedding import Embedder
from services.common.logging import get_logger
from services.common.security.client import ClientSecurity
from services.common.server import GrpcServer
from services.common.stores.base import LexicalStore, VectorStore
from services.common.stores.visibility import CommittedGeneration
from services.retriever.pipeline import RetrievalConfig, RetrievalPipeline
from services.retriever.rerank_client import RerankClient
from services.retriever.settings import RetrieverSettings

log = get_logger(__name__)


def retrieval_config(settings: RetrieverSettings) -> RetrievalConfig:
    names = RetrievalConfig.__dataclass_fields__
    return RetrievalConfig(**{name: getattr(settings, name) for name in names})


def build_retrieval_pipeline(
    settings: RetrieverSettings,
    embedder: Embedder,
    vectors: VectorStore,
    lexical: LexicalStore,
    executor: Executor,
    committed: CommittedGeneration | None = None,
) -> RetrievalPipeline:
    reranker = (
        RerankClient(
            settings.reranker_addr,
            settings.max_message_bytes,
            ClientSecurity.from_settings(settings, "reranker"),
        )
        if settings.reranker_addr
        else None
    )
    return RetrievalPipeline(
        embedder,
        vectors,
        lexical,
        reranker,
        executor,
        retrieval_config(settings),
        analyzer=getattr(lexical, "analyzer", None),
        committed=committed,
    )


class StoreHealthMonitor:
    """Retriever health: SERVING while at least one store answers (Retrieve
    degrades to the other), NOT_SERVING when neither does."""

    def __init__(
        self,
        server: GrpcServer,
        service: str,
        vectors: VectorStore,
        lexical: LexicalStore,
        interval_s: float,
    ) -> None:
        self.server, self.service = server, service
        self.stores = (vectors, lexical)
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    async def check_once(self) -> bool:
        healthy = []
        for store in self.stores:
            try:
                await asyncio.wait_for(asyncio.to_thread(store.ping), self.interval_s)
                healthy.append(store.name)
            except Exception as exc:
                log.warning("store_unreachable", store=store.name, error=str(exc))
        serving = bool(healthy)
        await self.server.set_serving(serving, self.service)
        await self.server.set_serving(serving, "")
        return serving

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await self.check_once()
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
