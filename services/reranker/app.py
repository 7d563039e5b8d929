"""The Reranker process, assembled from its settings: gRPC server first (so
health and Info answer at once), then the model, loaded and warmed up in a
thread. Health turns SERVING only when that succeeds; otherwise it stays
NOT_SERVING and Info carries the reason, so callers fall back visibly.
"""

from __future__ import annotations

import asyncio
import time

from services.common.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.common.logging import get_logger
from services.common.server import GrpcServer, ServerOptions
from services.reranker.scorer import CrossEncoderScorer, InputLimits, ModelLoadError
from services.reranker.servicer import METHOD_ROLES, SERVICE_NAME, RerankerServicer
from services.reranker.settings import RerankerSettings

log = get_logger(__name__)


def scorer_from_settings(settings: RerankerSettings) -> CrossEncoderScorer:
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
    )


class RerankerApp:
    """Server + servicer + scorer for one Reranker process."""

    def __init__(self, settings: RerankerSettings) -> None:
        self.settings = settings
        self.scorer = scorer_from_settings(settings)
        limits = InputLimits(settings.rerank_max_passages, settings.rerank_max_passage_chars)
        self.servicer = RerankerServicer(
            self.scorer, limits, settings.rerank_safety_margin_ms, settings.rerank_workers
        )
        options = ServerOptions.from_settings(settings, settings.reranker_port)
        self.server = GrpcServer(options, [SERVICE_NAME], METHOD_ROLES)
        reranker_pb2_grpc.add_RerankerServicer_to_server(self.servicer, self.server.server)

    async def start(self) -> int:
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
        NOT_SERVING and log why (the process keeps running to say so)."""
        started = time.perf_counter()
        try:
            await asyncio.to_thread(self._load_and_warm_up)
        except ModelLoadError as exc:
            log.error("reranker_not_serving", reason=str(exc))
            return False
        await self.server.set_serving(True)
        log.info(
            "reranker_serving",
            ready_ms=round((time.perf_counter() - started) * 1000, 1),
            **self.scorer.describe(),
        )
        return True

    def _load_and_warm_up(self) -> None:
        self.scorer.load()
        self.scorer.warm_up()

    async def stop(self) -> None:
        await self.server.stop()
        self.servicer.close()
