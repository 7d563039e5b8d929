"""The Reranker process, assembled from its settings: gRPC server first (so
health and Info answer at once), then the model, loaded and warmed up in a
thread. Health turns SERVING only when that succeeds; otherwise it stays
NOT_SERVING and Info carries the reason, so callers fall back visibly.
"""

from __future__ import annotations

import asyncio
import threading
import time

from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.core.logging import get_logger
from services.reranker.metrics import RerankerMetrics
from services.reranker.onnx_backend import abandon_runs
from services.reranker.scorer import (
    CrossEncoderScorer,
    InputLimits,
    ModelLoadError,
    ScoringObserver,
)
from services.reranker.servicer import METHOD_ROLES, SERVICE_NAME, RerankerServicer
from services.reranker.settings import RerankerSettings
from services.runtime.observability.telemetry import Telemetry
from services.runtime.server import LIVENESS_SERVICE
from services.runtime.service import GrpcApp, ServiceIdentity, freeze_start_up_objects

log = get_logger(__name__)
IDENTITY = ServiceIdentity("reranker", SERVICE_NAME, METHOD_ROLES)


def scorer_from_settings(
    settings: RerankerSettings, observer: ScoringObserver | None = None
) -> CrossEncoderScorer:
    return CrossEncoderScorer(
        settings.rerank_model,
        backend=settings.rerank_backend,
        max_length=settings.rerank_max_length,
        batch_size=settings.rerank_batch_size,
        device=settings.rerank_device,
        activation=settings.rerank_activation,
        threads=settings.rerank_threads,
        onnx_spin=settings.rerank_onnx_spin,
        cache_dir=settings.rerank_cache_dir,
        model_cache=settings.rerank_model_cache,
        observer=observer,
        max_requests=settings.rerank_workers,
    )


class RerankerApp(GrpcApp[RerankerSettings]):
    """Server + servicer + scorer for one Reranker process. `start()` opens the
    port and loads the model in the background (`loading`)."""

    def __init__(
        self,
        settings: RerankerSettings,
        telemetry: Telemetry | None = None,
        port: int | None = None,
    ) -> None:
        """`port` None: RAG_RERANKER_PORT (tests pass 0: any free port)."""
        super().__init__(IDENTITY, settings, port, telemetry)
        self.metrics = RerankerMetrics(self.telemetry.registry)
        self.scorer = scorer_from_settings(settings, self.metrics)
        limits = InputLimits(settings.rerank_max_passages, settings.rerank_max_passage_chars)
        self.servicer = RerankerServicer(
            self.scorer,
            limits,
            settings.rerank_safety_margin_ms,
            settings.rerank_default_deadline_ms,
        )
        reranker_pb2_grpc.add_RerankerServicer_to_server(self.servicer, self.server.server)
        self.loading: asyncio.Task[bool] | None = None
        self._warm_up_over = threading.Event()

    async def start(self) -> int:
        """The port first (health and Info answer at once), then the model."""
        port = await self.open_port()
        self.loading = asyncio.create_task(self._load_for_good())
        return port

    async def _load_for_good(self) -> bool:
        """The model, then (loaded for the process's lifetime) out of the
        garbage collector's reach, as `run_apps` does for the other apps."""
        loaded = await self.load_model()
        if loaded:
            freeze_start_up_objects()
        return loaded

    async def open_port(self) -> int:
        port = await self.server.start()
        log.info(
            "reranker_starting",
            port=port,
            **self.scorer.describe(),
            max_passages=self.settings.rerank_max_passages,
            max_passage_chars=self.settings.rerank_max_passage_chars,
            threads=self.settings.rerank_threads,
            onnx_spin=self.settings.rerank_onnx_spin,
        )
        return port

    async def load_model(self) -> bool:
        """Load and warm up off the event loop; SERVING on success, else stay
        NOT_SERVING and log why (the process keeps running to say so, in Info
        and in each refused call). Liveness goes NOT_SERVING too: a model that
        cannot load never will, and a green liveness check kept an orchestrator
        from ever flagging the process (probe)."""
        started = time.perf_counter()
        try:
            await asyncio.to_thread(self._load_and_warm_up)
        except ModelLoadError as exc:
            log.error("reranker_not_serving", reason=str(exc), liveness="NOT_SERVING")
            await self.server.set_serving(False, LIVENESS_SERVICE)
            return False
        await self.server.set_serving(True)
        log.info(
            "reranker_serving",
            ready_ms=round((time.perf_counter() - started) * 1000, 1),
            **self.scorer.describe(),
        )
        return True

    def _load_and_warm_up(self) -> None:
        try:
            self.scorer.load()
            self.scorer.warm_up()
        finally:
            self._warm_up_over.set()

    async def _abandon_warm_up(self, most_s: float = 10.0) -> None:
        """End a warm-up still running: the process exit waits for its thread,
        70 s at a batch size of 512 (probe). Its model runs are abandoned
        between operators, again and again: a run may start in between."""
        ends = time.monotonic() + most_s
        while not self._warm_up_over.is_set() and time.monotonic() < ends:
            abandon_runs()
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.loading is not None and not self.loading.done():
            self.loading.cancel()
            await self._abandon_warm_up()
        await self.server.stop()
        self.scorer.close()
