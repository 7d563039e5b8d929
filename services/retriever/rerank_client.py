"""The Retriever's client of the Reranker: rag_client's AsyncRerankerClient
on a channel the Retriever opens (TLS, its token, trace and request-id
propagation: services.runtime.security.client), one attempt per call (the
rerank budget is too short to retry in; RerankerHealth decides when to call
again), a deadline on every call.

Failures keep fixed reason prefixes (`reranker did not answer within …`,
`reranker <CODE>: …`): gateway/reasons.py maps them to public codes. The gRPC
code also travels on the exception (`RerankUnavailable.code`), so callers
decide on it without parsing text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from rag_client import CallError, ClientSettings, RetryPolicy
from rag_client.reranker import SERVICE_NAME, AsyncRerankerClient
from rag_client.transport import MAX_MESSAGE_BYTES
from services.core.errors import DeadlineExceeded, Unavailable
from services.runtime.security.client import ClientSecurity, aio_channel
from services.runtime.server import client_channel_options

# The name the Reranker reports health under.
RERANKER_SERVICE: str = SERVICE_NAME
_ONE_ATTEMPT = RetryPolicy(max_attempts=1)


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


class RerankClient:
    def __init__(
        self,
        addr: str,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        security: ClientSecurity | None = None,
    ) -> None:
        self.addr = addr
        # Reconnects within a couple of seconds (client_channel_options);
        # RerankerHealth paces the health checks themselves.
        options = client_channel_options(max_message_bytes)
        channel = aio_channel(addr, security or ClientSecurity(), options)
        self._client = AsyncRerankerClient(ClientSettings(addr, retry=_ONE_ATTEMPT), channel)

    async def rerank(self, query: str, passages: Sequence[str], timeout_s: float) -> RerankReply:
        """Raise DeadlineExceeded or RerankUnavailable (with the reason) on failure."""
        if timeout_s <= 0:
            raise DeadlineExceeded("reranker not called: no time left in the rerank budget")
        try:
            reply = await self._client.rerank(query, passages, deadline=timeout_s)
        except CallError as exc:
            if exc.code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise DeadlineExceeded(
                    f"reranker did not answer within {timeout_s * 1000:.0f} ms"
                ) from exc
            raise RerankUnavailable(f"reranker {exc.code.name}: {exc.details}", exc.code) from exc
        return RerankReply(list(reply.scores), reply.partial, reply.stop_reason, reply.model)

    async def max_passages(self, timeout_s: float) -> int:
        """The most passages the Reranker scores in one call, from its Info
        (0: it does not say). Raises CallError when Info does not answer."""
        try:
            info = await self._client.info(deadline=max(timeout_s, 0.001))
        except CallError as exc:
            if exc.code == grpc.StatusCode.UNIMPLEMENTED:
                return 0  # a Reranker without Info: nothing to learn
            raise
        return max(info.max_passages, 0)

    async def check_health(self, timeout_s: float) -> bool:
        """True when the Reranker's health service says SERVING for the Reranker;
        False when it says otherwise or cannot be asked (unreachable, timeout)."""
        try:
            return await self._client.serving(deadline=max(timeout_s, 0.001))
        except CallError as exc:
            # A server without the health service cannot be watched: treat it
            # as serving, so it is called (and a failed call says why).
            return exc.code == grpc.StatusCode.UNIMPLEMENTED

    async def close(self) -> None:
        await self._client.close()
