"""The embedded stack: the Indexer and Retriever apps composed on one set of
shared parts (embedded stores have a single writer, so the Retriever reads
through the Indexer's open handles, and one embedding model serves both).

Nothing here builds a pipeline or a server: each app does that itself, as it
does when it runs alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from services.common.embedding import Embedder
from services.common.observability.telemetry import Telemetry
from services.common.parts import PartsConfig, SharedParts, check_same_embedding, open_parts
from services.common.stores.settings import StoreSettings
from services.indexer.app import IndexerApp
from services.indexer.settings import IndexerSettings
from services.retriever.app import RetrieverApp, retriever_parts
from services.retriever.settings import RetrieverSettings


def stack_parts(indexer: IndexerSettings, retriever: RetrieverSettings) -> PartsConfig:
    """The Retriever's parts with the Indexer's batch size and document
    precision; one embedder serves both, so their embedding settings must agree."""
    check_same_embedding(indexer, retriever)
    return replace(
        retriever_parts(retriever),
        embedding_batch_size=indexer.embedding_batch_size,
        document_precision=indexer.embedding_document_precision,
    )


class EmbeddedStack:
    """Both apps on `parts`; `stop()` stops them and closes the parts."""

    def __init__(
        self,
        indexer: IndexerApp,
        retriever: RetrieverApp,
        parts: SharedParts,
    ) -> None:
        self.indexer, self.retriever, self.parts = indexer, retriever, parts

    @classmethod
    async def open(
        cls,
        stores: StoreSettings,
        indexer: IndexerSettings,
        retriever: RetrieverSettings,
        *,
        embedder: Embedder | None = None,
        any_ports: bool = False,
        telemetry: tuple[Telemetry, Telemetry] | None = None,
    ) -> EmbeddedStack:
        """Open the parts (off the event loop) and build both apps.
        `any_ports`: free ports for gRPC (tests); `telemetry`: the apps' own
        (tests: in-memory tracing, no listener)."""
        config = stack_parts(indexer, retriever)
        parts = await asyncio.to_thread(open_parts, stores, config, embedder)
        port = 0 if any_ports else None
        indexer_telemetry, retriever_telemetry = telemetry or (None, None)
        return cls(
            IndexerApp(indexer, parts, indexer_telemetry, port),
            RetrieverApp(retriever, parts, retriever_telemetry, port),
            parts,
        )

    @property
    def apps(self) -> list[IndexerApp | RetrieverApp]:
        return [self.indexer, self.retriever]

    async def start(self) -> None:
        await self.indexer.start()
        await self.retriever.start()

    async def stop(self) -> None:
        await self.retriever.stop()
        await self.indexer.stop()
        if not self.indexer.abandoned_work:  # else a run still writes to them
            await asyncio.to_thread(self.parts.close)
