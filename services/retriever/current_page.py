"""The current-page answer's last step: a current-page request never falls
back to site-wide results; when the page has no chunks it says so."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

from services.core.deadline import Deadline
from services.core.errors import RagError
from services.core.models import ScopeFilter
from services.retriever.requests import RetrievalResult
from services.storage.base import LexicalStore

NOT_INDEXED = "This page is not indexed, so there is nothing to answer from."


async def check_page(
    result: RetrievalResult,
    lexical: LexicalStore,
    executor: Executor,
    scope: ScopeFilter,
    deadline: Deadline,
    margin_s: float,
) -> None:
    """Mark whether the page is indexed (counting its chunks when there is
    no hit); a count that fails or runs out of time leaves it unknown."""
    if result.hits:
        result.page_indexed = True
        return
    loop = asyncio.get_running_loop()
    # The store's count ends with our wait: the margin is kept for the reply.
    within = deadline.shortened(margin_s)
    try:
        count = await asyncio.wait_for(
            loop.run_in_executor(executor, lexical.count, scope, within),
            max(within.budget(), 0.001),
        )
    except (TimeoutError, RagError, OSError):
        return
    result.page_indexed = count > 0
    if count == 0:
        result.message = NOT_INDEXED
