"""Client for the Reranker service, with a deadline on every call.

Failures keep fixed reason prefixes (`reranker did not answer within …`,
`reranker <CODE>: …`): gateway/reasons.py maps them to public codes. The gRPC
code also travels on the exception (`RerankUnavailable.code`), so callers
decide on it without parsing text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.core.errors import DeadlineExceeded, Unavailable
from services.runtime.security.client import ClientSecurity, aio_channel
from services.runtime.server import client_channel_options

# The name the Reranker reports health under (as services/reranker/servicer.py
# derives it; not imported from there, which would load torch into the Retriever).
RERANKER_SERVICE: str = pb.DESCRIPTOR.services_by_name["Reranker"].full_name


@dataclass(frozen=True)
class RerankReply:
    scores: list[float]  # for passages[0:len(scores)]
    partial: bool
    stop_reason: str
    model: str


class RerankUnavailable(Unavailable):
    """A Rerank call that failed with a status other than DEADLINE_EXCEEDED;
    `code` is that status (UNAVAILABLE, FAILED_PRECONDITION, INTERNAL, …)."""

    def __init__(self, message: str, code: grpc.StatusCode) -> None:
        super().__init__(message)
        self.code = code


# gRPC's own reconnect backoff grows to 120 s: a Reranker that comes up
# would stay unreachable to the Retriever's health checks (and calls) that
# long. Reconnect within a couple of seconds instead; RerankerHealth paces the
# checks themselves.
RECONNECT_OPTIONS: list[tuple[str, int | str]] = [
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class RerankClient:
    def __init__(
        self,
        addr: str,
        max_message_bytes: int = 16 * 1024 * 1024,
        security: ClientSecurity | None = None,
    ) -> None:
        self.addr = addr
        options = [*client_channel_options(max_message_bytes), *RECONNECT_OPTIONS]
        self._channel = aio_channel(addr, security or ClientSecurity(), options)
        self._stub = reranker_pb2_grpc.RerankerStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def rerank(self, query: str, passages: Sequence[str], timeout_s: float) -> RerankReply:
        """Raise DeadlineExceeded or RerankUnavailable (with the reason) on failure."""
        request = pb.RerankRequest(query=query, passages=list(passages))
        try:
            reply = await self._stub.Rerank(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise DeadlineExceeded(
                    f"reranker did not answer within {timeout_s * 1000:.0f} ms"
                ) from exc
            raise RerankUnavailable(
                f"reranker {exc.code().name}: {exc.details()}", exc.code()
            ) from exc
        return RerankReply(list(reply.scores), reply.partial, reply.stop_reason, reply.model)

    async def check_health(self, timeout_s: float) -> bool:
        """True when the Reranker's health service says SERVING for the Reranker;
        False when it says otherwise or cannot be asked (unreachable, timeout)."""
        request = health_pb2.HealthCheckRequest(service=RERANKER_SERVICE)
        try:
            reply = await self._health.Check(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            # A server without the health service cannot be watched: treat it
            # as serving, so it is called (and a failed call says why).
            return exc.code() == grpc.StatusCode.UNIMPLEMENTED
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    async def close(self) -> None:
        await self._channel.close()
