"""gRPC adapter for the Reranker: proto messages in and out, scoring in the core.

A call hands its pairs to the scorer and awaits them: the model runs on the
scorer's own thread, so the event loop keeps answering health, Info and new
calls while it computes, and no thread is held per waiting call. Concurrent
calls share the model's batches (`services.reranker.batching`), and each is
answered by its own deadline.
"""

from __future__ import annotations

import grpc

from services.contract.genproto.rag.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.core.deadline import Deadline
from services.core.logging import get_logger
from services.reranker.jobs import ScoreResult
from services.reranker.scorer import CrossEncoderScorer, InputLimits
from services.runtime.grpc_errors import unary
from services.runtime.security.callers import Role, method_roles

log = get_logger(__name__)

SERVICE_NAME: str = reranker_pb2.DESCRIPTOR.services_by_name["Reranker"].full_name
METHOD_ROLES = method_roles(SERVICE_NAME, {"Rerank": Role.READER, "Info": Role.READER})


class RerankerServicer(reranker_pb2_grpc.RerankerServicer):
    def __init__(
        self,
        scorer: CrossEncoderScorer,
        limits: InputLimits,
        safety_margin_ms: float = 15.0,
        default_deadline_ms: float = 10_000,
    ) -> None:
        """`default_deadline_ms`: a call's deadline when its caller sets none,
        and the longest any call may take."""
        self.scorer = scorer
        self.limits = limits
        self.safety_margin_ms = safety_margin_ms
        self.default_deadline_s = default_deadline_ms / 1000

    @unary
    async def Rerank(
        self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.RerankResponse:
        query, passages = self.limits.clean(request.query, list(request.passages))
        # The caller's deadline, less the time the reply needs to travel back.
        deadline = Deadline.from_grpc(context, self.default_deadline_s)
        deadline = deadline.shortened(self.safety_margin_ms / 1000)
        budget_ms = round(deadline.remaining_s() * 1000, 1) if deadline.bounded else None
        result = await self.scorer.score_async(query, passages, deadline.at)
        # DEBUG only: one line per call would flood the logs at serving rates;
        # the counts and waits are in the metrics (services.reranker.metrics).
        log.debug(
            "reranked",
            passages=len(passages),
            scored=result.scored,
            partial=result.partial,
            stop_reason=result.stop_reason,
            elapsed_ms=round(result.elapsed_ms, 1),
            budget_ms=budget_ms,
        )
        return self._response(result)

    def _response(self, result: ScoreResult) -> reranker_pb2.RerankResponse:
        return reranker_pb2.RerankResponse(
            scores=result.scores,
            scored=result.scored,
            partial=result.partial,
            stop_reason=result.stop_reason,
            model=self.scorer.model,
            elapsed_ms=result.elapsed_ms,
        )

    @unary
    async def Info(
        self, request: reranker_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.InfoResponse:
        return reranker_pb2.InfoResponse(
            **self.scorer.describe(),
            loaded=self.scorer.loaded,
            reason=self.scorer.reason,
            max_passages=self.limits.max_passages,
            max_passage_chars=self.limits.max_passage_chars,
        )
