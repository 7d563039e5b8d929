"""The Retriever app: its pipeline built from settings and the shared parts,
behind its gRPC server, with the store health monitor
(`python -m services.retriever`, and the embedded stack)."""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor

from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.core.analysis.bilingual_dictionary import load_cedict
from services.core.analysis.query_translation import QueryTranslator
from services.core.logging import get_logger
from services.embedding.embedder import Embedder
from services.retriever.language import EVERY_LANGUAGE
from services.retriever.locale_balance import CrossLanguageLexical, LocaleBalance
from services.retriever.metrics import RetrievalMetrics
from services.retriever.page_keys import PageTokenKeys
from services.retriever.pipeline import RetrievalConfig, RetrievalPipeline
from services.retriever.request_proto import RequestLimits
from services.retriever.rerank_client import RerankClient
from services.retriever.reranker_health import RerankerHealth
from services.retriever.scope_locales import IndexLocales
from services.retriever.servicer import METHOD_ROLES, SERVICE_NAME, RetrieverServicer
from services.retriever.settings import RetrieverSettings
from services.retriever.steps import LanguageCrossing, build_retrieval_steps
from services.runtime.model_record import check_served_models
from services.runtime.observability.telemetry import Telemetry
from services.runtime.observability.tracing import Tracing
from services.runtime.parts import PartsConfig, SharedParts
from services.runtime.security.client import ClientSecurity
from services.runtime.service import GrpcApp, ServiceIdentity
from services.runtime.store_health import StoreHealthMonitor
from services.storage.storage import Storage
from services.storage.visibility import CommittedGeneration

log = get_logger(__name__)
IDENTITY = ServiceIdentity("retriever", SERVICE_NAME, METHOD_ROLES)


def retrieval_config(settings: RetrieverSettings) -> RetrievalConfig:
    names = RetrievalConfig.__dataclass_fields__
    return RetrievalConfig(**{name: getattr(settings, name) for name in names})


def build_retrieval_pipeline(
    settings: RetrieverSettings,
    embedder: Embedder,
    storage: Storage,
    executor: Executor,
    committed: CommittedGeneration | None = None,
    tracing: Tracing | None = None,
    metrics: RetrievalMetrics | None = None,
    locales: IndexLocales | None = None,
    cross_lingual: Embedder | None = None,
    channel_executor: Executor | None = None,
) -> RetrievalPipeline:
    """`tracing`: spans per stage when on; `metrics`: counts every answer, and
    shows the Reranker's health when one is configured (None: nothing counted);
    `locales`: the index's locales (ranking across languages)."""
    tracing = tracing or Tracing.off()
    reranker, health = reranker_from_settings(settings)
    if metrics is not None and health is not None:
        metrics.watch_reranker(health)
    steps = build_retrieval_steps(
        embedder,
        storage,
        reranker,
        executor,
        retrieval_config(settings),
        committed=committed,
        tracer=tracing.tracer if tracing.enabled else None,
        record_query_text=tracing.record_query_text,
        reranker_health=health,
        metrics=metrics,
        crossing=LanguageCrossing(locales, query_translator(settings, embedder), cross_lingual),
        page_keys=PageTokenKeys.from_settings(settings),
        channel_executor=channel_executor,
    )
    return RetrievalPipeline(steps)


def query_translator(settings: RetrieverSettings, embedder: Embedder) -> QueryTranslator | None:
    """The dictionary translator when locales may be ranked apart (a model
    that reads every language) and cross-language lexical search is on; the
    dictionary is parsed once per process, only then (~1.4 s)."""
    if settings.cross_language_lexical is not CrossLanguageLexical.DICTIONARY:
        return None
    if settings.vector_locale_balance is not LocaleBalance.INTERLEAVE:
        return None
    if EVERY_LANGUAGE not in embedder.languages:
        return None
    return QueryTranslator(load_cedict(embedder.config.onnx_cache_dir))


def reranker_from_settings(
    settings: RetrieverSettings,
) -> tuple[RerankClient | None, RerankerHealth | None]:
    """The Reranker client and the watch on its health (None, None: no
    Reranker configured, RAG_RERANKER_ADDR empty)."""
    if not settings.reranker_addr:
        return None, None
    client = RerankClient(
        settings.reranker_addr,
        settings.max_message_bytes,
        ClientSecurity.from_settings(settings, "reranker"),
    )
    health = RerankerHealth(
        client.check_health,
        initial_backoff_s=settings.reranker_recheck_s,
        max_backoff_s=settings.reranker_recheck_max_s,
    )
    return client, health


def retriever_parts(settings: RetrieverSettings) -> PartsConfig:
    """The parts a Retriever alone opens."""
    return PartsConfig(
        embedding=settings,
        query_cache_size=settings.query_cache_size,
        query_cache_ttl_s=settings.query_cache_ttl_s,
        query_max_batch=settings.query_max_batch,
        io_threads=settings.worker_threads,
        committed_refresh_s=settings.committed_generation_refresh_s,
    )


class RetrieverApp(GrpcApp[RetrieverSettings]):
    """Pipeline + servicer + server + store health monitor for one Retriever."""

    def __init__(
        self,
        settings: RetrieverSettings,
        parts: SharedParts,
        telemetry: Telemetry | None = None,
        port: int | None = None,
    ) -> None:
        """`port` None: RAG_RETRIEVER_PORT (tests pass 0: any free port)."""
        super().__init__(IDENTITY, settings, port, telemetry)
        self.parts = parts
        cross_lingual = parts.cross_lingual.identity if parts.cross_lingual else None
        check_served_models(parts.storage.manifest, parts.embedder.identity, cross_lingual)
        self.metrics = RetrievalMetrics(self.telemetry.registry)
        # The channels' searches get threads of their own: when slow ones pile
        # up (long questions whose callers gave up), the short reads every
        # request needs (the commit point first) still find a thread in the
        # shared pool (issue "Hold under faults", probe 3).
        self.channel_executor = ThreadPoolExecutor(
            max_workers=settings.worker_threads, thread_name_prefix="rag-channels"
        )
        self.pipeline = build_retrieval_pipeline(
            settings,
            parts.embedder,
            parts.storage,
            parts.executor,
            parts.committed,
            self.telemetry.tracing,
            self.metrics,
            IndexLocales.of(parts.storage.manifest),
            parts.cross_lingual,
            self.channel_executor,
        )
        # The embedder may be shared with an Indexer (embedded stack); only the
        # Retriever embeds queries, so its query passes are the Retriever's.
        parts.embedder.query_observer = self.metrics
        # SERVING while either store answers: Retrieve degrades to the other.
        self.monitor = StoreHealthMonitor(
            self.server,
            SERVICE_NAME,
            (parts.storage.vectors, parts.storage.lexical),
            settings.health_check_interval_s,
            need_all=False,
        )

    async def start(self) -> int:
        servicer = RetrieverServicer(
            self.pipeline,
            self.settings.default_deadline_ms,
            index_status=self.parts.index_status,
            limits=RequestLimits.from_settings(self.settings),
        )
        retriever_pb2_grpc.add_RetrieverServicer_to_server(servicer, self.server.server)
        port = await self.server.start()
        await self.pipeline.start()
        await self.monitor.check_once()
        self.monitor.start()
        return port

    async def stop(self) -> None:
        await self.monitor.stop()
        await self.server.stop()
        await self.pipeline.close()
        self.channel_executor.shutdown(wait=False, cancel_futures=True)
        if self.parts.embedder.query_observer is self.metrics:  # the embedder may outlive us
            self.parts.embedder.query_observer = None
