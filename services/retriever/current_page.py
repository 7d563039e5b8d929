"""The current-page answer's last step: a current-page request never falls
back to site-wide results; when the page has no chunks it says so."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

from services.core.deadline import Deadline
from services.core.errors import RagError
from services.core.models import ScopeFilter
from services.retriever.tail_reserve import TailReserve
from services.retriever.types import FusedHit
from services.storage.base import LexicalStore

NOT_INDEXED = "This page is not indexed, so there is nothing to answer from."


class PageCheck:
    """Whether a current-page request's page is indexed."""

    def __init__(self, lexical: LexicalStore, executor: Executor, reserve: TailReserve) -> None:
        """`reserve`: the time kept for the reply (the request's shared margin,
        services.retriever.tail_reserve)."""
        self.lexical, self.executor, self.reserve = lexical, executor, reserve

    async def indexed(
        self, hits: list[FusedHit], scope: ScopeFilter, deadline: Deadline
    ) -> bool | None:
        """True when there is a hit; else whether the page has chunks
        (counted), None when a count fails or runs out of time: unknown."""
        if hits:
            return True
        loop = asyncio.get_running_loop()
        # The store's count ends with our wait: the margin is kept for the reply.
        within = deadline.shortened(self.reserve.margin_within(deadline))
        try:
            count = await asyncio.wait_for(
                loop.run_in_executor(self.executor, self.lexical.count, scope, within),
                max(within.budget(), 0.001),
            )
        except (TimeoutError, RagError, OSError):
            return None
        return count > 0
