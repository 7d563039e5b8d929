"""Clients of rag.retriever.v1.Retriever: blocking and asyncio.

    with RetrieverClient(ClientSettings(target="localhost:50052")) as client:
        reply = client.retrieve("how do I restore a backup", top_k=3, scope_id="handbook")
        for hit in reply.hits:
            print(hit.rank, hit.url, hit.heading_path)

Both RPCs only read, so both are retried on UNAVAILABLE (within the
deadline and the retry policy): repeating them changes nothing."""

from __future__ import annotations

from typing import Unpack

from rag_client.base import AsyncClient, DeadlineArg, SyncClient
from rag_client.requests import RetrieveOptions, retrieve_request
from rag_client.settings import ClientSettings
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc

RetrieveRequest = rpb.RetrieveRequest
RetrieveResponse = rpb.RetrieveResponse
IndexStatusResponse = rpb.IndexStatusResponse


class RetrieverClient(SyncClient):
    """Blocking client of the Retriever. `settings`: ClientSettings, or a
    target ("host:port") with every other setting at its default."""

    SERVICE = "Retriever"
    ENV_NAME = "retriever"

    def __init__(self, settings: ClientSettings | str) -> None:
        super().__init__(settings)
        self._stub = retriever_pb2_grpc.RetrieverStub(self._channel)

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


class AsyncRetrieverClient(AsyncClient):
    """The asyncio counterpart of RetrieverClient (same methods, awaited)."""

    SERVICE = "Retriever"
    ENV_NAME = "retriever"

    def __init__(self, settings: ClientSettings | str) -> None:
        super().__init__(settings)
        self._stub = retriever_pb2_grpc.RetrieverStub(self._channel)

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
