"""Concurrent Retrieve calls' vector searches as one store call.

Searches that arrive while the vector store is busy with another request's
wait and then go together through `VectorStore.search_many`, which Qdrant
Edge answers in one pass over its segments (measured on SciFact, 12,508
chunks, 16 searches of 50: 43.5 ms one by one, 28.4 ms as one batch) and a
Qdrant server in one request. A request alone runs at once
(`services.core.coalescing`).

A batch runs until the latest deadline among its callers, so nobody's
search is cut short by a neighbour's tighter one; a caller whose own time
runs out first is given up by its channel's timeout as before.

Off by default (`RAG_VECTOR_SEARCH_BATCH=1`: each request's searches go to
the store at once, side by side with other requests'). Measured on this
2-core machine (SciFact, embedded stack, hybrid, c=16, two interleaved A/B
rounds): 44.4 and 54.7 requests/s off, 43.6 and 47.2 on. One batch at a time
gives up the parallel searches it saves calls on, and the model, not the
store, bounds throughput here. Where each call costs a network round trip
(a Qdrant server) coalescing may pay; measure before turning it on.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.core.coalescing import Coalescer, CoalescingStats
from services.core.deadline import Deadline
from services.core.models import ScoredChunk
from services.storage.base import VectorQuery, VectorStore

Search = tuple[VectorQuery, Deadline]


class VectorSearchBatcher:
    """`search_many` of `store`, shared by concurrent callers (at most
    `max_searches` per store call; 1: every caller's searches alone)."""

    def __init__(self, store: VectorStore, max_searches: int) -> None:
        self.store = store
        self._coalescer: Coalescer[Search, list[ScoredChunk]] = Coalescer(self._run, max_searches)

    def search_many(
        self, queries: Sequence[VectorQuery], deadline: Deadline
    ) -> list[list[ScoredChunk]]:
        if self._coalescer.max_items == 1:  # off: callers search side by side
            return self.store.search_many(queries, deadline)
        return self._coalescer.submit([(query, deadline) for query in queries])

    def stats(self) -> CoalescingStats:
        return self._coalescer.stats()

    def _run(self, searches: list[Search]) -> list[list[ScoredChunk]]:
        return self.store.search_many(
            [query for query, _ in searches],
            latest([deadline for _, deadline in searches]),
        )


def latest(deadlines: Sequence[Deadline]) -> Deadline:
    """The deadline that ends last (one that never ends, when any does)."""
    bounded = [d for d in deadlines if d.at is not None]
    if not deadlines or len(bounded) < len(deadlines):
        return Deadline.never()
    return max(bounded, key=lambda d: d.at or 0.0)
