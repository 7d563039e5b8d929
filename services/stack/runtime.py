"""Open the shared parts (embedder, stores, manifest) and start the Indexer
and/or Retriever gRPC servers on them.

Used by `python -m services.indexer`, `python -m services.retriever` (one
service per process, server mode) and `python -m services.stack` (both in one
process: embedded stores have a single writer, so the Retriever reads through
the Indexer's open handles).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from services.common.embedding import Embedder, EmbedderConfig
from services.common.embedding_settings import EmbeddingSettings, declared_languages
from services.common.errors import ConfigError
from services.common.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.common.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.common.logging import get_logger
from services.common.server import GrpcServer, ServerOptions
from services.common.settings import GrpcServiceSettings
from services.common.stores.base import LexicalStore, VectorStore
from services.common.stores.factory import Storage, open_storage
from services.common.stores.manifest import Manifest
from services.common.stores.settings import StoreSettings
from services.common.stores.visibility import CommittedGeneration, ReleaseVerdict, read_release
from services.indexer.app import build_indexing_pipeline
from services.indexer.servicer import METHOD_ROLES as INDEXER_ROLES
from services.indexer.servicer import SERVICE_NAME as INDEXER_SERVICE
from services.indexer.servicer import IndexerServicer
from services.indexer.settings import IndexerSettings
from services.retriever.app import StoreHealthMonitor, build_retrieval_pipeline
from services.retriever.servicer import METHOD_ROLES as RETRIEVER_ROLES
from services.retriever.servicer import SERVICE_NAME as RETRIEVER_SERVICE
from services.retriever.servicer import RequestLimits, RetrieverServicer
from services.retriever.settings import RetrieverSettings

log = get_logger(__name__)

ONNX_CACHE_SUBDIR = "models"  # under RAG_DATA_DIR: ONNX exports of the embedding model


@dataclass
class Runtime:
    embedder: Embedder
    storage: Storage
    executor: ThreadPoolExecutor
    # The Retriever's view of the commit point; an in-process Indexer advances it.
    committed: CommittedGeneration
    servers: list[GrpcServer] = field(default_factory=list)
    monitors: list[StoreHealthMonitor] = field(default_factory=list)

    def index_status(self) -> tuple[int, ReleaseVerdict | None]:
        """The served generation and the latest release verdict (IndexStatus)."""
        return self.committed.current(), read_release(self.manifest)

    @property
    def vectors(self) -> VectorStore:
        return self.storage.vectors

    @property
    def lexical(self) -> LexicalStore:
        return self.storage.lexical

    @property
    def manifest(self) -> Manifest:
        return self.storage.manifest

    async def stop(self) -> None:
        for monitor in self.monitors:
            await monitor.stop()
        await asyncio.gather(*(s.stop() for s in self.servers))
        self.storage.close()
        self.executor.shutdown(wait=False, cancel_futures=True)


EMBEDDING_FIELDS = tuple(
    name for name in EmbeddingSettings.model_fields if name not in GrpcServiceSettings.model_fields
)


def embedder_config(
    indexer: IndexerSettings | None, retriever: RetrieverSettings | None, data_dir: Path
) -> EmbedderConfig:
    """One embedder serves both services: their embedding settings must agree."""
    if indexer and retriever:
        _check_same_embedding(indexer, retriever)
    source = indexer or retriever
    assert source is not None
    return EmbedderConfig(
        model=source.embedding_model,
        batch_size=indexer.embedding_batch_size if indexer else 64,
        query_cache_size=retriever.query_cache_size if retriever else 0,
        query_cache_ttl_s=retriever.query_cache_ttl_s if retriever else 0.0,
        backend=source.embedding_backend,
        onnx_cache_dir=source.embedding_cache_dir or data_dir / ONNX_CACHE_SUBDIR,
        threads=source.embedding_threads,
        onnx_spin=source.embedding_onnx_spin,
        query_max_batch=retriever.query_max_batch if retriever else 1,
        languages=declared_languages(source.embedding_languages),
    )


def _check_same_embedding(indexer: IndexerSettings, retriever: RetrieverSettings) -> None:
    for name in EMBEDDING_FIELDS:
        ours, theirs = getattr(indexer, name), getattr(retriever, name)
        if ours != theirs:
            raise ConfigError(
                f"RAG_{name.upper()} differs between indexer ({ours!r}) and retriever "
                f"({theirs!r}); one embedder serves both, and queries must be embedded "
                "the way the index was"
            )


def open_runtime(
    stores: StoreSettings,
    indexer: IndexerSettings | None,
    retriever: RetrieverSettings | None,
    embedder: Embedder | None = None,
) -> Runtime:
    """Open everything the chosen services need (`embedder` may be shared, e.g. by tests)."""
    embedder = embedder or Embedder(embedder_config(indexer, retriever, stores.data_dir))
    storage = open_storage(stores, embedder.dim)
    threads = retriever.worker_threads if retriever else 8
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rag-io")
    refresh_s = retriever.committed_generation_refresh_s if retriever else 1.0
    committed = CommittedGeneration.of(storage.manifest, refresh_s)
    return Runtime(embedder, storage, executor, committed)


async def start_indexer(runtime: Runtime, settings: IndexerSettings, port: int) -> GrpcServer:
    pipeline = build_indexing_pipeline(
        settings, runtime.embedder, runtime.vectors, runtime.lexical, runtime.manifest
    )
    pipeline.on_commit = runtime.committed.advance
    # Before the port opens: runs a crash left unfinished are settled first
    # (their rows were never visible; this removes them).
    await asyncio.to_thread(pipeline.recover)
    options = ServerOptions.from_settings(settings, port)
    server = GrpcServer(options, [INDEXER_SERVICE], INDEXER_ROLES)
    indexer_pb2_grpc.add_IndexerServicer_to_server(IndexerServicer(pipeline), server.server)
    await server.start()
    await server.set_serving(True)
    runtime.servers.append(server)
    return server


async def start_retriever(runtime: Runtime, settings: RetrieverSettings, port: int) -> GrpcServer:
    pipeline = build_retrieval_pipeline(
        settings,
        runtime.embedder,
        runtime.vectors,
        runtime.lexical,
        runtime.executor,
        runtime.committed,
    )
    options = ServerOptions.from_settings(settings, port)
    server = GrpcServer(options, [RETRIEVER_SERVICE], RETRIEVER_ROLES)
    servicer = RetrieverServicer(
        pipeline,
        settings.default_deadline_ms,
        index_status=runtime.index_status,
        limits=RequestLimits.from_settings(settings),
    )
    retriever_pb2_grpc.add_RetrieverServicer_to_server(servicer, server.server)
    await server.start()
    monitor = StoreHealthMonitor(
        server,
        RETRIEVER_SERVICE,
        runtime.vectors,
        runtime.lexical,
        settings.health_check_interval_s,
    )
    await monitor.check_once()
    monitor.start()
    runtime.servers.append(server)
    runtime.monitors.append(monitor)
    return server


async def serve(*, indexer: bool, retriever: bool) -> None:
    """Run the chosen services in this process until SIGTERM/SIGINT."""
    from services.common.logging import configure_logging
    from services.common.server import run_until_signal
    from services.common.settings import load_settings

    indexer_settings = load_settings(IndexerSettings) if indexer else None
    retriever_settings = load_settings(RetrieverSettings) if retriever else None
    stores = load_settings(StoreSettings)
    first = indexer_settings or retriever_settings
    assert first is not None
    configure_logging(first.log_level, first.log_json)
    runtime = await asyncio.to_thread(open_runtime, stores, indexer_settings, retriever_settings)
    if indexer_settings:
        await start_indexer(runtime, indexer_settings, indexer_settings.indexer_port)
    if retriever_settings:
        await start_retriever(runtime, retriever_settings, retriever_settings.retriever_port)
    log.info(
        "services_ready",
        ports=[s.port for s in runtime.servers],
        mode=stores.resolved_mode().value,
        data_dir=str(stores.data_dir),
    )
    await run_until_signal(runtime.servers)
    await runtime.stop()
