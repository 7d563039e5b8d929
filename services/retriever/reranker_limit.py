"""How many passages the Reranker takes in one call, learnt from the Reranker.

The Retriever's `RAG_RERANK_CANDIDATES` and the Reranker's
`RAG_RERANK_MAX_PASSAGES` are set in two processes; when the first exceeds
the second, the Reranker refuses every call (INVALID_ARGUMENT) and every
answer comes back degraded. The Retriever asks the Reranker's Info for its
limit at start-up, again in the background while it does not know it (the
Reranker may start later), and again after a refusal (it may have restarted
with other settings), and sends at most that many, saying so once in the log.
No request ever waits for the question.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from rag_client import RagClientError
from services.core.deadline import Clock
from services.core.logging import get_logger

log = get_logger(__name__)

# Ask the Reranker its limit; the argument is the call's timeout in seconds,
# the answer 0 when it does not say. `RerankClient.max_passages` is one.
AskLimit = Callable[[float], Awaitable[int]]


class RerankerLimit:
    def __init__(
        self,
        ask: AskLimit,
        configured: int,
        *,
        timeout_s: float = 0.5,
        retry_s: float = 5.0,
        clock: Clock = time.monotonic,
    ) -> None:
        """`configured`: the candidates asked for; `retry_s`: how soon to ask
        again after a question that got no answer."""
        self._ask = ask
        self.configured = configured
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self._clock = clock
        self._learnt: int | None = None  # None: not known yet
        self._warned: int | None = None  # the limit last logged as a cap
        self._next_ask_at = 0.0
        self._asking: asyncio.Task[None] | None = None

    def candidates(self) -> int:
        """How many to send now: the configured number, capped by the
        Reranker's limit once known; starts a background question if due."""
        if self._learnt is None:
            self._ask_soon()
            return self.configured
        return min(self.configured, self._learnt) if self._learnt else self.configured

    def forget(self) -> None:
        """The Reranker refused a call's input: ask its limit again, now, in
        the background (call on the event loop)."""
        self._learnt, self._next_ask_at = None, 0.0
        self._ask_soon()

    async def learn(self) -> None:
        """Ask now (at start-up); a failure leaves it to the background."""
        if self._asking is None or self._asking.done():
            await self._learn()

    async def stop(self) -> None:
        """Drop a question still out (at shutdown)."""
        if self._asking is not None and not self._asking.done():
            self._asking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._asking

    def _ask_soon(self) -> None:
        due = self._clock() >= self._next_ask_at
        if due and (self._asking is None or self._asking.done()):
            self._asking = asyncio.get_running_loop().create_task(self._learn())

    async def _learn(self) -> None:
        self._next_ask_at = self._clock() + self.retry_s
        try:
            limit = await self._ask(self.timeout_s)
        except RagClientError as exc:  # unreachable, not started yet, closing: ask later
            log.debug("reranker_limit_unknown", reason=str(exc)[:200])
            return
        if 0 < limit < self.configured and self._warned != limit:
            self._warned = limit
            log.warning(
                "rerank_candidates_capped",
                configured=self.configured,
                reranker_max_passages=limit,
                hint="lower RAG_RERANK_CANDIDATES or raise the Reranker's RAG_RERANK_MAX_PASSAGES",
            )
        self._learnt = limit
