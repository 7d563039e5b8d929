"""The Indexer app: its pipeline built from settings and the shared parts,
behind its gRPC server (`python -m services.indexer`, and the embedded stack)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from opentelemetry import trace

from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.core.thread_priority import per_thread_nice
from services.embedding.embedder import Embedder, EmbeddingIdentity
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.document_encoders import record_document_encoder
from services.indexer.metrics import IndexerMetrics
from services.indexer.pipeline import IndexingPipeline
from services.indexer.planning import Planner
from services.indexer.servicer import METHOD_ROLES, SERVICE_NAME, IndexerServicer
from services.indexer.settings import IndexerSettings
from services.indexer.validation import DocumentLimits
from services.runtime.model_record import (
    cross_lingual_problem,
    cross_lingual_record,
    model_problem,
    model_record,
    recorded_model,
)
from services.runtime.observability.telemetry import Telemetry
from services.runtime.parts import PartsConfig, SharedParts, document_precision
from services.runtime.service import GrpcApp, ServiceIdentity
from services.runtime.store_health import StoreHealthMonitor
from services.storage.base import unrequested_deadline
from services.storage.manifest import CROSS_LINGUAL_META, EMBEDDING_META, Manifest
from services.storage.storage import Storage

log = get_logger(__name__)
IDENTITY = ServiceIdentity("indexer", SERVICE_NAME, METHOD_ROLES)


def build_indexing_pipeline(
    settings: IndexerSettings,
    embedder: Embedder,
    storage: Storage,
    cross_lingual: Embedder | None = None,
    *,
    build_in_run: bool = True,
    on_commit: Callable[[int], None] | None = None,
    metrics: IndexerMetrics | None = None,
    tracer: trace.Tracer | None = None,
) -> IndexingPipeline:
    """`cross_lingual`: the model of the chunks' second vector (the one
    `storage` was opened with)."""
    params = chunking_params(settings)
    limits = DocumentLimits.from_settings(settings)
    manifest = storage.manifest
    check_embedding_model(manifest, embedder.identity)
    check_cross_lingual_model(manifest, cross_lingual.identity if cross_lingual else None)
    record_document_encoder(manifest, embedder.document_encoder)
    planner = Planner(Chunker(params), manifest, limits, clean_markdown=settings.clean_markdown)
    return IndexingPipeline(
        planner,
        embedder,
        storage,
        write_batch=settings.write_batch,
        defer_vector_builds=settings.vector_settle_after_s > 0,
        build_in_run=build_in_run,
        on_commit=on_commit,
        metrics=metrics,
        tracer=tracer,
    )


def chunking_params(settings: IndexerSettings) -> ChunkingParams:
    return ChunkingParams(
        target_chars=settings.chunk_target_chars,
        overlap_chars=settings.chunk_overlap_chars,
        max_slack_chars=settings.chunk_max_slack_chars,
    )


def check_embedding_model(manifest: Manifest, configured: EmbeddingIdentity) -> None:
    """Refuse to add vectors of one model to an index built with another: an
    unchanged document is never re-embedded, so the index would silently mix
    two vector spaces and the vector channel would rank by noise."""
    problem = model_problem(manifest, configured, "RAG_EMBEDDING_MODEL and RAG_EMBEDDING_PROMPTS")
    if problem is not None:
        raise ConfigError(problem)
    if recorded_model(manifest) is None and (documents := manifest.count(unrequested_deadline())):
        # An index from before models were recorded: its model cannot be known.
        log.warning("embedding_model_adopted", model=configured.model, documents=documents)
    manifest.set_meta(EMBEDDING_META, model_record(configured), unrequested_deadline())


def check_cross_lingual_model(manifest: Manifest, configured: EmbeddingIdentity | None) -> None:
    """As `check_embedding_model`, for the second vector: an index holds one
    model's second vectors or none, never a mix (an unchanged chunk is never
    re-embedded) nor chunks without one."""
    problem = cross_lingual_problem(manifest, configured)
    if problem is not None:
        raise ConfigError(problem)
    record = cross_lingual_record(configured)
    manifest.set_meta(CROSS_LINGUAL_META, record, unrequested_deadline())


def indexer_parts(settings: IndexerSettings) -> PartsConfig:
    """The parts an Indexer alone opens."""
    return PartsConfig(
        embedding=settings,
        embedding_batch_size=settings.embedding_batch_size,
        document_precision=document_precision(settings),
        document_nice=settings.index_work_nice,
    )


class IndexerApp(GrpcApp[IndexerSettings]):
    """Pipeline + servicer + server for one Indexer on the shared parts."""

    def __init__(
        self,
        settings: IndexerSettings,
        parts: SharedParts,
        telemetry: Telemetry | None = None,
        port: int | None = None,
    ) -> None:
        """`port` None: RAG_INDEXER_PORT (tests pass 0: any free port)."""
        super().__init__(IDENTITY, settings, port, telemetry)
        self.parts = parts
        # In the app's registry, served by its metrics listener.
        self.metrics = IndexerMetrics(self.telemetry.registry, parts.storage)
        self.pipeline: IndexingPipeline | None = None
        self.servicer: IndexerServicer | None = None
        self.monitor: StoreHealthMonitor | None = None
        # A run still in its thread after the grace period: the shared parts
        # must not be closed under it (see services.indexer.worker_threads).
        self.abandoned_work = False

    async def start(self) -> int:
        parts = self.parts
        tracing = self.telemetry.tracing.enabled
        pipeline = build_indexing_pipeline(
            self.settings,
            parts.embedder,
            parts.storage,
            parts.cross_lingual,
            build_in_run=False,  # the servicer builds after the run's reply
            on_commit=parts.committed.advance,
            metrics=self.metrics,
            tracer=self.telemetry.tracer if tracing else None,
        )
        # Before the port opens: runs a crash left unfinished are settled first
        # (their rows were never visible; this removes them).
        await asyncio.to_thread(pipeline.recover)
        self.pipeline = pipeline
        self.servicer = IndexerServicer(
            pipeline, self.settings.index_work_nice, self.settings.vector_settle_after_s
        )
        log.info(
            "index_work_priority",
            nice=self.settings.index_work_nice,
            per_thread=per_thread_nice(),  # False: not Linux, the setting has no effect
        )
        if pipeline.defer_vector_builds:
            # A stop soon after a load's last run left its deferred build undone.
            self.servicer.idle_settle.arm()
        indexer_pb2_grpc.add_IndexerServicer_to_server(self.servicer, self.server.server)
        port = await self.server.start()
        self.monitor = StoreHealthMonitor(
            self.server,
            SERVICE_NAME,
            (self.parts.storage.vectors, self.parts.storage.lexical),
            self.settings.health_check_interval_s,
            need_all=True,  # a run writes to both
        )
        await self.monitor.check_once()
        self.monitor.start()
        return port

    async def stop(self) -> None:
        """In-flight calls get the grace period, and so do runs still in their
        threads after it; a run that outlives both is abandoned, to be undone
        by the recovery at the next start."""
        if self.monitor is not None:
            await self.monitor.stop()
        await self.server.stop()
        if self.servicer is None:
            return
        grace_s = self.settings.shutdown_grace_s
        if not await self.servicer.settle(grace_s):
            self.abandoned_work = True
            log.error(
                "index_run_abandoned",
                grace_s=grace_s,
                running=self.servicer.workers.busy,
                note="the run is undone by the recovery at the next start",
            )
