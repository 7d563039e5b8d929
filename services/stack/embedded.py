"""The embedded stack: the Indexer and Retriever apps composed on one set of
shared parts (embedded stores have a single writer, so the Retriever reads
through the Indexer's open handles, and one embedding model serves both).

Nothing here builds a pipeline or a server: each app does that itself, as it
does when it runs alone. `python -m services.stack` starts the two through
the recipe every service follows (`StackSettings` → `stack_parts` → the apps:
services/stack/__main__.py); tests compose them in an `EmbeddedStack`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from services.indexer.app import IndexerApp
from services.indexer.settings import IndexerSettings
from services.retriever.app import RetrieverApp, retriever_parts
from services.retriever.settings import RetrieverSettings
from services.runtime.parts import (
    PartsConfig,
    SharedParts,
    check_same_embedding,
    document_precision,
)
from services.runtime.service import stop_within_budget
from services.storage.settings import StoreSettings


@dataclass(frozen=True)
class StackSettings:
    """What the embedded stack loads: both services' settings and the stores'."""

    indexer: IndexerSettings
    retriever: RetrieverSettings
    stores: StoreSettings


def stack_parts(indexer: IndexerSettings, retriever: RetrieverSettings) -> PartsConfig:
    """The Retriever's parts with the Indexer's batch size and document
    precision; one embedder serves both, so their embedding settings must agree."""
    check_same_embedding(indexer, retriever)
    return replace(
        retriever_parts(retriever),
        embedding_batch_size=indexer.embedding_batch_size,
        document_precision=document_precision(indexer),
        document_nice=indexer.index_work_nice,
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

    @property
    def apps(self) -> list[IndexerApp | RetrieverApp]:
        return [self.indexer, self.retriever]

    async def start(self) -> None:
        await self.indexer.start()
        await self.retriever.start()

    async def stop(self) -> bool:
        """Each app within its stop budget; the parts are closed only when
        neither left work behind (else a run may still use them). False when
        a stop overran its budget (logged, with every thread's stack)."""
        stopped = [await stop_within_budget(app) for app in (self.retriever, self.indexer)]
        if all(stopped) and not self.indexer.abandoned_work:
            await asyncio.to_thread(self.parts.close)
        return all(stopped)
