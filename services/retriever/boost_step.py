"""The boost step of Retrieve: reads the candidates' `updated_at` from the
manifest when a recency boost asks for it (one batched read, under the
request's deadline), applies the boosts (services.retriever.boosts) and
puts exact-identifier precedence back on top of the new order."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from datetime import datetime

from services.core.deadline import Deadline
from services.core.errors import RagError
from services.retriever.boosts import Boosts, apply_boosts
from services.retriever.exact import ExactPrecedence, exact_precedence
from services.retriever.types import FusedHit
from services.storage.manifest import Manifest


class BoostStep:
    def __init__(
        self,
        manifest: Manifest,
        executor: Executor,
        precedence: ExactPrecedence,
        read_timeout_s: float,
    ) -> None:
        self.manifest, self.executor, self.precedence = manifest, executor, precedence
        # Cap on the manifest read: boosts are worth less than an answer in time.
        self.read_timeout_s = read_timeout_s

    async def run(
        self, hits: list[FusedHit], boosts: Boosts, origin: datetime, deadline: Deadline
    ) -> tuple[list[FusedHit], str]:
        """The boosted order, and a note when recency could not be read."""
        if not boosts or not hits:
            return hits, ""
        updated_at, note = {}, ""
        if boosts.recency is not None:
            try:
                updated_at = await self._updated_at(hits, deadline)
            except (TimeoutError, RagError, OSError) as exc:
                note = f"recency boost skipped: the manifest did not answer ({type(exc).__name__})"
        boosted = apply_boosts(hits, boosts, updated_at, origin)
        return exact_precedence(boosted, self.precedence), note

    async def _updated_at(
        self, hits: list[FusedHit], deadline: Deadline
    ) -> dict[tuple[str, str], str]:
        keys = sorted({(hit.chunk.doc_id, hit.chunk.locale) for hit in hits})
        # The manifest gets the step's own deadline: a server read ends when we stop waiting.
        within = deadline.capped(self.read_timeout_s)
        loop = asyncio.get_running_loop()
        read = loop.run_in_executor(self.executor, self.manifest.get_many, keys, within)
        entries = await asyncio.wait_for(read, max(within.budget(), 0.001))
        return {key: entry.updated_at for key, entry in entries.items() if entry.updated_at}
