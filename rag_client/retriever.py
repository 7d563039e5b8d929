"""Clients of rag.retriever.v1.Retriever: blocking and asyncio.

    with RetrieverClient(ClientSettings(target="localhost:50052")) as client:
        reply = client.retrieve("how do I restore a backup", top_k=3, scope_id="handbook")
        for hit in reply.hits:
            print(hit.rank, hit.url, hit.heading_path)

Every call only reads, so each is retried on UNAVAILABLE (within the
deadline and the retry policy): repeating it changes nothing. `serving`
asks the Retriever's standard gRPC health service (grpc.health.v1)."""

from __future__ import annotations

from typing import Unpack

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from rag_client.base import AsyncClient, DeadlineArg, SyncClient
from rag_client.requests import RetrieveOptions, retrieve_request
from rag_client.settings import ClientSettings
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc

RetrieveRequest = rpb.RetrieveRequest
RetrieveResponse = rpb.RetrieveResponse
IndexStatusResponse = rpb.IndexStatusResponse
# The name the Retriever's health service reports its own state under.
SERVICE_NAME = rpb.DESCRIPTOR.services_by_name["Retriever"].full_name
_SERVING = health_pb2.HealthCheckResponse.SERVING


class RetrieverClient(SyncClient):
    """Blocking client of the Retriever. `settings`: ClientSettings, or a
    target ("host:port") with every other setting at its default."""

    SERVICE = "Retriever"
    ENV_NAME = "retriever"

    def __init__(self, settings: ClientSettings | str, channel: grpc.Channel | None = None) -> None:
        """`channel`: see SyncClient."""
        super().__init__(settings, channel)
        self._stub = retriever_pb2_grpc.RetrieverStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def retrieve(
        self,
        query: str | RetrieveRequest,
        *,
        deadline: DeadlineArg = None,
        **options: Unpack[RetrieveOptions],
    ) -> RetrieveResponse:
        """Hits and evidence for `query` (see RetrieveOptions for the keywords),
        or for a prepared RetrieveRequest. Raises a CallError subclass."""
        request = retrieve_request(query, **options)
        return self._unary("Retrieve", self._stub.Retrieve, request, deadline, idempotent=True)

    def index_status(self, *, deadline: DeadlineArg = None) -> IndexStatusResponse:
        """The index generation served and the latest release check's verdict."""
        request = rpb.IndexStatusRequest()
        return self._unary(
            "IndexStatus", self._stub.IndexStatus, request, deadline, idempotent=True
        )

    def serving(self, *, deadline: DeadlineArg = None) -> bool:
        """Whether the Retriever says it serves (its health service's
        SERVING; False for NOT_SERVING or UNKNOWN). Raises a CallError
        subclass when the health service does not answer."""
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        reply = self._unary("Health", self._health.Check, request, deadline, idempotent=True)
        return bool(reply.status == _SERVING)


class AsyncRetrieverClient(AsyncClient):
    """The asyncio counterpart of RetrieverClient (same methods, awaited)."""

    SERVICE = "Retriever"
    ENV_NAME = "retriever"

    def __init__(
        self, settings: ClientSettings | str, channel: grpc.aio.Channel | None = None
    ) -> None:
        """`channel`: see AsyncClient."""
        super().__init__(settings, channel)
        self._stub = retriever_pb2_grpc.RetrieverStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def retrieve(
        self,
        query: str | RetrieveRequest,
        *,
        deadline: DeadlineArg = None,
        **options: Unpack[RetrieveOptions],
    ) -> RetrieveResponse:
        request = retrieve_request(query, **options)
        return await self._unary(
            "Retrieve", self._stub.Retrieve, request, deadline, idempotent=True
        )

    async def index_status(self, *, deadline: DeadlineArg = None) -> IndexStatusResponse:
        request = rpb.IndexStatusRequest()
        return await self._unary(
            "IndexStatus", self._stub.IndexStatus, request, deadline, idempotent=True
        )

    async def serving(self, *, deadline: DeadlineArg = None) -> bool:
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        check = self._health.Check
        reply = await self._unary("Health", check, request, deadline, idempotent=True)
        return bool(reply.status == _SERVING)
