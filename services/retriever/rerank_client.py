"""Client for the Reranker service, with a deadline on every call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from services.common.errors import DeadlineExceeded, Unavailable
from services.common.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.common.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.common.security.client import ClientSecurity, aio_channel
from services.common.server import client_channel_options


@dataclass(frozen=True)
class RerankReply:
    scores: list[float]  # for passages[0:len(scores)]
    partial: bool
    stop_reason: str
    model: str


class RerankClient:
    def __init__(
        self,
        addr: str,
        max_message_bytes: int = 16 * 1024 * 1024,
        security: ClientSecurity | None = None,
    ) -> None:
        self.addr = addr
        self._channel = aio_channel(
            addr, security or ClientSecurity(), client_channel_options(max_message_bytes)
        )
        self._stub = reranker_pb2_grpc.RerankerStub(self._channel)

    async def rerank(self, query: str, passages: Sequence[str], timeout_s: float) -> RerankReply:
        """Raise DeadlineExceeded or Unavailable (with the reason) on failure."""
        request = pb.RerankRequest(query=query, passages=list(passages))
        try:
            reply = await self._stub.Rerank(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise DeadlineExceeded(
                    f"reranker did not answer within {timeout_s * 1000:.0f} ms"
                ) from exc
            raise Unavailable(f"reranker {exc.code().name}: {exc.details()}") from exc
        return RerankReply(list(reply.scores), reply.partial, reply.stop_reason, reply.model)

    async def close(self) -> None:
        await self._channel.close()
