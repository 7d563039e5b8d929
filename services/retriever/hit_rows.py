"""The second phase of a two-phase fetch: whole rows for the hits kept.

A search reads only what fusion, the per-document cap, boosts and the
visibility rule need (`stores.payload.SEARCH_FIELDS`); a channel asks for
~50 candidates and an answer keeps ~10, and the text is most of a row. The
text the Reranker scores, the identifiers a vector-only hit holds, and what
the evidence quotes and cites are read here: once per step that needs them,
for the hits still `partial`, in one call to one store (the other one if
that fails), under the request's deadline.

A row read here may have been rewritten since its search by a run that has
not committed: such a hit is dropped, as is one whose row is gone, so an
answer never quotes what was not committed.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
from collections.abc import Sequence
from concurrent.futures import Executor

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, RagError, Unavailable
from services.core.logging import get_logger
from services.core.models import StoredChunk
from services.retriever.types import Channel, FusedHit
from services.storage.base import LexicalStore, VectorStore

log = get_logger(__name__)


class HitRows:
    """Completes partial hits from the vector or the lexical store."""

    def __init__(self, vectors: VectorStore, lexical: LexicalStore, executor: Executor) -> None:
        self.vectors, self.lexical, self.executor = vectors, lexical, executor

    async def complete(
        self,
        hits: Sequence[FusedHit],
        deadline: Deadline,
        visible_generation: int | None,
        answered: Sequence[Channel] = (Channel.VECTOR, Channel.LEXICAL),
    ) -> list[FusedHit]:
        """`hits` with whole rows, in the same order, minus any whose row is
        gone or newer than `visible_generation`. `answered`: the channels
        whose stores answered this request, asked first (a lookup by id in
        either store; the vector store's is a point lookup everywhere)."""
        wanted = [hit.chunk.chunk_id for hit in hits if hit.chunk.partial]
        if not wanted:
            return list(hits)
        rows = await self._read(wanted, deadline, _store_order(answered))
        kept = []
        for hit in hits:
            row = rows.get(hit.chunk.chunk_id) if hit.chunk.partial else hit.chunk
            if row is not None and _visible(row, visible_generation):
                kept.append(dataclasses.replace(hit, chunk=row))
        return kept

    async def _read(
        self, chunk_ids: list[str], deadline: Deadline, order: Sequence[Channel]
    ) -> dict[str, StoredChunk]:
        failures = []
        for channel in order:
            store = self.vectors if channel is Channel.VECTOR else self.lexical
            try:
                rows = await self._get(store, chunk_ids, deadline)
            except DeadlineExceeded:
                raise
            except (RagError, OSError) as exc:
                log.warning("hit_rows_failed", store=store.name, error=str(exc))
                failures.append(f"{store.name}: {exc}")
                continue
            return {row.chunk_id: row for row in rows}
        raise Unavailable(f"the hits' text could not be read ({'; '.join(failures)})")

    async def _get(
        self, store: VectorStore | LexicalStore, chunk_ids: list[str], deadline: Deadline
    ) -> list[StoredChunk]:
        if deadline.expired():
            raise DeadlineExceeded("no time left in the deadline to read the hits' text")
        loop = asyncio.get_running_loop()
        # In the request's context: its log lines carry the request id.
        read = functools.partial(contextvars.copy_context().run, store.get, chunk_ids, deadline)
        reading = loop.run_in_executor(self.executor, read)
        try:
            return await asyncio.wait_for(reading, deadline.timeout_or_none())
        except TimeoutError as exc:
            raise DeadlineExceeded(f"{store.name}: reading the hits' text ran out of time") from exc


def _store_order(answered: Sequence[Channel]) -> list[Channel]:
    """The answering channels' stores first (vector before lexical), then the rest."""
    first = [c for c in (Channel.VECTOR, Channel.LEXICAL) if c in answered]
    return first + [c for c in (Channel.VECTOR, Channel.LEXICAL) if c not in first]


def _visible(row: StoredChunk, visible_generation: int | None) -> bool:
    return visible_generation is None or row.generation <= visible_generation
