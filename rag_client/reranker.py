"""Clients of rag.reranker.v1.Reranker: blocking and asyncio.

    with RerankerClient(ClientSettings(target="localhost:50053")) as client:
        reply = client.rerank("how do I restore a backup", ["Restore: ...", "Backup: ..."])
        print(reply.scores, reply.partial, reply.stop_reason)

A Rerank answers by its deadline with what it scored: `scores[i]` belongs
to `passages[i]` for i < `scored`, and `partial` says whether the rest were
left out (`stop_reason` says why). Every call only reads, so each is retried
on UNAVAILABLE within the deadline and the retry policy. `serving` asks the
Reranker's standard gRPC health service (grpc.health.v1)."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from rag_client.base import AsyncClient, DeadlineArg, SyncClient
from rag_client.requests import not_one_string
from rag_client.settings import ClientSettings
from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc

RerankResponse = pb.RerankResponse
InfoResponse = pb.InfoResponse
# The name the Reranker's health service reports its own state under.
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Reranker"].full_name
_SERVING = health_pb2.HealthCheckResponse.SERVING


def rerank_request(query: str, passages: Sequence[str]) -> pb.RerankRequest:
    not_one_string("passages", passages)
    return pb.RerankRequest(query=query, passages=list(passages))


class RerankerClient(SyncClient):
    """Blocking client of the Reranker. `settings`: ClientSettings, or a
    target ("host:port") with every other setting at its default."""

    SERVICE = "Reranker"
    ENV_NAME = "reranker"

    def __init__(self, settings: ClientSettings | str, channel: grpc.Channel | None = None) -> None:
        """`channel`: see SyncClient."""
        super().__init__(settings, channel)
        self._stub = reranker_pb2_grpc.RerankerStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def rerank(
        self, query: str, passages: Sequence[str], *, deadline: DeadlineArg = None
    ) -> RerankResponse:
        """The passages' scores against `query`, as many as fit the deadline."""
        request = rerank_request(query, passages)
        return self._unary("Rerank", self._stub.Rerank, request, deadline, idempotent=True)

    def info(self, *, deadline: DeadlineArg = None) -> InfoResponse:
        """The model served, its limits, and why it is not loaded (if not)."""
        request = pb.InfoRequest()
        return self._unary("Info", self._stub.Info, request, deadline, idempotent=True)

    def serving(self, *, deadline: DeadlineArg = None) -> bool:
        """Whether the Reranker says it serves (its health service's SERVING).
        Raises a CallError subclass when the health service does not answer."""
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        reply = self._unary("Health", self._health.Check, request, deadline, idempotent=True)
        return bool(reply.status == _SERVING)


class AsyncRerankerClient(AsyncClient):
    """The asyncio counterpart of RerankerClient (same methods, awaited)."""

    SERVICE = "Reranker"
    ENV_NAME = "reranker"

    def __init__(
        self, settings: ClientSettings | str, channel: grpc.aio.Channel | None = None
    ) -> None:
        """`channel`: see AsyncClient."""
        super().__init__(settings, channel)
        self._stub = reranker_pb2_grpc.RerankerStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def rerank(
        self, query: str, passages: Sequence[str], *, deadline: DeadlineArg = None
    ) -> RerankResponse:
        request = rerank_request(query, passages)
        return await self._unary("Rerank", self._stub.Rerank, request, deadline, idempotent=True)

    async def info(self, *, deadline: DeadlineArg = None) -> InfoResponse:
        request = pb.InfoRequest()
        return await self._unary("Info", self._stub.Info, request, deadline, idempotent=True)

    async def serving(self, *, deadline: DeadlineArg = None) -> bool:
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        check = self._health.Check
        reply = await self._unary("Health", check, request, deadline, idempotent=True)
        return bool(reply.status == _SERVING)
