"""The gateway's one downstream: the Retriever, through the typed client of
`rag_client` (its asyncio twin) on the channel the gateway opens (TLS, the
bearer token, trace and request-id propagation:
services.runtime.security.client). No retries here: the gateway's breaker
and the caller's own retry decide, within the caller's deadline."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from gateway.errors import ApiError, ErrorCode
from rag_client import AsyncRetrieverClient, CallError, ClientSettings, RetryPolicy
from rag_client.retriever import SERVICE_NAME as RETRIEVER_SERVICE
from services.contract.genproto.rag.retriever.v1 import retriever_pb2
from services.runtime.security.client import ClientSecurity, aio_channel
from services.runtime.security.scopes import SCOPE_REQUIRED
from services.runtime.server import client_channel_options

__all__ = ["RETRIEVER_SERVICE", "RetrieverClient", "RetrieverClientFactory", "api_error_for"]

# Builds the typed client on the channel the gateway owns (tests inject faults here).
RetrieverClientFactory = Callable[[ClientSettings, grpc.aio.Channel], AsyncRetrieverClient]

# One attempt per call: repeating a failed search is the caller's decision.
_ONE_ATTEMPT = RetryPolicy(max_attempts=1)

# The Retriever's message for these names the request's field and the limit:
# it is about the client's own input, so it is passed on.
_INPUT_CODES = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE})
# Rejected for a reason that is not the client's input: a fixed message.
_REJECTED_CODES = frozenset({grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND})


class RetrieverClient:
    """Owns the channel; each call passes the caller's remaining time on as
    the call's deadline, so the Retriever can plan its stages within it.
    A failed call raises rag_client's CallError (`api_error_for` maps it)."""

    def __init__(
        self,
        address: str,
        max_message_bytes: int,
        client_factory: RetrieverClientFactory | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.address = address
        self.security = security or ClientSecurity()
        self.max_message_bytes = max_message_bytes
        self.client_factory: RetrieverClientFactory = client_factory or AsyncRetrieverClient
        self._client: AsyncRetrieverClient | None = None

    def open(self) -> None:
        """Create the channel and the client; must run inside the serving event loop."""
        options = client_channel_options(self.max_message_bytes)
        channel = aio_channel(self.address, self.security, options)
        settings = ClientSettings(self.address, retry=_ONE_ATTEMPT)
        self._client = self.client_factory(settings, channel)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def retrieve(
        self, request: retriever_pb2.RetrieveRequest, timeout_s: float
    ) -> retriever_pb2.RetrieveResponse:
        return await self._opened().retrieve(request, deadline=timeout_s)

    async def index_status(self, timeout_s: float) -> retriever_pb2.IndexStatusResponse:
        return await self._opened().index_status(deadline=timeout_s)

    async def is_serving(self, timeout_s: float) -> tuple[bool, str]:
        """Ask the Retriever's health service; (serving?, reason when not)."""
        if self._client is None:
            return False, "not started"
        try:
            serving = await self._client.serving(deadline=timeout_s)
        except CallError as exc:
            return False, f"retriever health check failed: {exc.code.name}"
        if not serving:
            return False, "retriever is not serving"
        return True, ""

    def _opened(self) -> AsyncRetrieverClient:
        if self._client is None:
            raise RuntimeError("RetrieverClient.open() was not called")
        return self._client


def _public_reason(details: str) -> str:
    """The Retriever's reason for refusing the input, as the public may read
    it: one that speaks of the gateway's own credential (its caller name, the
    scopes it may read) says what to change without them."""
    if details.startswith(SCOPE_REQUIRED):
        return "scope.scope_id: required here; name the scope to search (or several in scope_ids)"
    if "caller '" in details:
        return "the search could not be run as asked"
    return details or "rejected by the retriever"


def api_error_for(exc: CallError) -> ApiError:
    """The gateway's answer to a failed Retrieve."""
    code, details = exc.code, exc.details or ""
    if code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("page_token:"):
        # Not one of ours, altered, or out of range (services.retriever.paging).
        return ApiError(ErrorCode.INVALID_PAGE_TOKEN, details)
    if code in _INPUT_CODES:
        return ApiError(ErrorCode.UPSTREAM_REJECTED, _public_reason(details))
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
    # UNAVAILABLE is transient by gRPC's definition (a restart, a reconnect):
    # a client may retry after a second. Other failures do not say when.
    wait_s = 1 if code == grpc.StatusCode.UNAVAILABLE else None
    return ApiError(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "the search backend is unavailable right now",
        retry_after_s=wait_s,
    )
