"""A bound on the work one document may cost the Indexer, and the place where
long per-document work looks at its run's deadline and cancellation.

The chunker ticks a `WorkMeter` once per chunk it cuts. Its cost per tick is
bounded (one window of candidates, found by bisection), so steps are the work;
a document that needs more steps than the budget is rejected on its own with a
message naming it, and the rest of its batch goes on. Every `check_every`
steps the meter also calls `check` (a run's `RunControl.check`), so a caller's
deadline or a cancelled RPC stops even the work inside one large document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.core.errors import InvalidArgument


class WorkBudgetExceeded(InvalidArgument):
    """One document needed more work than its budget allows."""


@dataclass
class WorkMeter:
    """Counts steps; `limit` (None: unbounded) and `check` are optional."""

    limit: int | None = None
    check: Callable[[], None] | None = None
    check_every: int = 64
    what: str = "the document"
    steps: int = 0

    def tick(self) -> None:
        self.steps += 1
        if self.limit is not None and self.steps > self.limit:
            raise WorkBudgetExceeded(
                f"{self.what} needs more than {self.limit} chunking steps "
                "(RAG_MAX_CHUNKING_STEPS): split it into smaller documents"
            )
        if self.check is not None and self.steps % self.check_every == 0:
            self.check()

    def for_document(self, what: str) -> WorkMeter:
        """A fresh meter with the same limit and check, naming `what`."""
        return WorkMeter(self.limit, self.check, self.check_every, what)
