"""gRPC adapter for the Retriever: a request decoded for its caller
(request_proto), the pipeline run, the result encoded (answer_proto)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded
from services.retriever.answer_proto import index_status_to_proto, result_to_proto
from services.retriever.pipeline import RetrievalPipeline
from services.retriever.request_proto import RequestLimits, request_from_proto
from services.runtime import grpc_errors
from services.runtime.security.callers import Role, method_roles
from services.runtime.security.server_auth import current_caller
from services.storage.visibility import ReleaseVerdict

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Retriever"].full_name
METHOD_ROLES = method_roles(SERVICE_NAME, {"Retrieve": Role.READER, "IndexStatus": Role.READER})

# The committed generation being served and the latest release verdict, if any.
IndexStatusSource = Callable[[], tuple[int, ReleaseVerdict | None]]


class RetrieverServicer(retriever_pb2_grpc.RetrieverServicer):
    def __init__(
        self,
        pipeline: RetrievalPipeline,
        default_deadline_ms: int,
        index_status: IndexStatusSource | None = None,
        limits: RequestLimits | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.limits = limits or RequestLimits()
        self.default_deadline_s = default_deadline_ms / 1000
        # None (no manifest to read): generation 0 and no release, so a Gateway
        # that requires a release stays closed instead of guessing.
        self.index_status = index_status

    @grpc_errors.unary
    async def Retrieve(
        self, request: pb.RetrieveRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetrieveResponse:
        deadline = Deadline.from_grpc(context, self.default_deadline_s)
        retrieval = request_from_proto(request, self.limits, current_caller())
        result = await self.pipeline.retrieve(retrieval, deadline)
        reply = result_to_proto(result, request.debug)
        raise_if_past_callers_deadline(context)
        return reply

    @grpc_errors.unary
    async def IndexStatus(
        self, request: pb.IndexStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.IndexStatusResponse:
        if self.index_status is None:
            return index_status_to_proto(0, None)
        generation, verdict = await asyncio.to_thread(self.index_status)  # reads the manifest
        return index_status_to_proto(generation, verdict)


def raise_if_past_callers_deadline(context: grpc.aio.ServicerContext) -> None:
    """An answer ready after the caller's deadline is not sent as one. The
    steps keep a margin for what follows them, but under load, or with a
    deadline of a few milliseconds, the reply can still be ready late; gRPC
    core may not have ended the call yet (its timer fires a moment after),
    and a late OK would reach a client that does not enforce its own
    deadline. DEADLINE_EXCEEDED says what happened."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceeded(
            f"the answer was ready {max(0.0, -remaining) * 1000:.0f} ms after the caller's deadline"
        )
