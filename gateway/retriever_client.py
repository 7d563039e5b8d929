"""The gateway's one downstream: the Retriever's gRPC API over a grpc.aio channel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.errors import ApiError, ErrorCode
from services.contract.genproto.rag.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.runtime.security.client import ClientSecurity, aio_channel
from services.runtime.server import client_channel_options

RETRIEVER_SERVICE = "rag.retriever.v1.Retriever"

# Builds the stub the gateway calls, on the channel the gateway owns.
RetrieverStubFactory = Callable[[grpc.aio.Channel], Any]

# The Retriever's message for these names the request's field and the limit:
# it is about the client's own input, so it is passed on.
_INPUT_CODES = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE})
# Rejected for a reason that is not the client's input: a fixed message.
_REJECTED_CODES = frozenset({grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND})


class RetrieverClient:
    """Owns the channel; `retrieve` passes the caller's remaining time on as
    the gRPC deadline, so the Retriever can plan its stages within it."""

    def __init__(
        self,
        address: str,
        max_message_bytes: int,
        stub_factory: RetrieverStubFactory | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.address = address
        self.security = security or ClientSecurity()
        self.max_message_bytes = max_message_bytes
        self.stub_factory: RetrieverStubFactory = stub_factory or retriever_pb2_grpc.RetrieverStub
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None
        self._health: health_pb2_grpc.HealthStub | None = None

    def open(self) -> None:
        """Create the channel; must run inside the serving event loop."""
        options = client_channel_options(self.max_message_bytes)
        self._channel = aio_channel(self.address, self.security, options)
        self._stub = self.stub_factory(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def retrieve(
        self, request: retriever_pb2.RetrieveRequest, timeout_s: float
    ) -> retriever_pb2.RetrieveResponse:
        if self._stub is None:
            raise RuntimeError("RetrieverClient.open() was not called")
        response: retriever_pb2.RetrieveResponse = await self._stub.Retrieve(
            request, timeout=timeout_s
        )
        return response

    async def index_status(self, timeout_s: float) -> retriever_pb2.IndexStatusResponse:
        if self._stub is None:
            raise RuntimeError("RetrieverClient.open() was not called")
        response: retriever_pb2.IndexStatusResponse = await self._stub.IndexStatus(
            retriever_pb2.IndexStatusRequest(), timeout=timeout_s
        )
        return response

    async def is_serving(self, timeout_s: float) -> tuple[bool, str]:
        """Ask the Retriever's health service; (serving?, reason when not)."""
        if self._health is None:
            return False, "not started"
        request = health_pb2.HealthCheckRequest(service=RETRIEVER_SERVICE)
        try:
            reply = await self._health.Check(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            return False, f"retriever health check failed: {exc.code().name}"
        if reply.status != health_pb2.HealthCheckResponse.SERVING:
            return False, "retriever is not serving"
        return True, ""


def api_error_for(exc: grpc.aio.AioRpcError) -> ApiError:
    """The gateway's answer to a failed Retrieve."""
    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("page_token:"):
        # Not one of ours, altered, or out of range (services.retriever.paging).
        return ApiError(ErrorCode.INVALID_PAGE_TOKEN, details)
    if code in _INPUT_CODES:
        return ApiError(ErrorCode.UPSTREAM_REJECTED, exc.details() or "rejected by the retriever")
    if code == grpc.StatusCode.FAILED_PRECONDITION and details.startswith("page_token:"):
        # The ranking a page token continued is gone (the index moved on):
        # the client starts again from the first page.
        return ApiError(ErrorCode.PAGE_EXPIRED, details)
    if code in _REJECTED_CODES:
        return ApiError(ErrorCode.UPSTREAM_REJECTED, "the search could not be run as asked")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        # The gateway's reader credential does not cover the scope asked for;
        # which scopes it covers is not the public's business.
        return ApiError(ErrorCode.SCOPE_NOT_ALLOWED, "this scope cannot be searched here")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ApiError(ErrorCode.UPSTREAM_TIMEOUT, "the search took too long; please try again")
    return ApiError(ErrorCode.UPSTREAM_UNAVAILABLE, "the search backend is unavailable right now")
