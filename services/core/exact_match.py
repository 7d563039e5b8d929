"""The exact-identifier rule, one for the lexical stores and the fused list.

Which of a query's identifiers (`text-embedding-v4`, `429`) a chunk holds in
their exact form, and the `lead` rule: the first hit holding the most of them
moves to the top, the order is kept otherwise. The lexical stores apply it
to their own ranking (services.storage.lexical_fields.exact_first) and the
Retriever to the fused one (services.retriever.exact), so both read it from
here rather than one of them reaching into the other's floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from services.core.analysis.identifiers import held_identifiers
from services.core.models import StoredChunk


def matched_identifiers(chunk: StoredChunk, identifiers: Sequence[str]) -> tuple[str, ...]:
    """The query identifiers `chunk` holds in their exact form, in query order."""
    found = held_identifiers((chunk.title, chunk.heading_path, chunk.text), identifiers)
    return tuple(identifier for identifier in identifiers if identifier in found)


class HoldsIdentifiers(Protocol):
    @property
    def exact(self) -> tuple[str, ...]: ...


Held = TypeVar("Held", bound=HoldsIdentifiers)


def lead_holder(hits: Sequence[Held]) -> list[Held]:
    """The first hit holding the most query identifiers moved to the top; the
    order is kept otherwise (the `lead` rule, in the stores and after fusion)."""
    most = max((len(hit.exact) for hit in hits), default=0)
    if not most:
        return list(hits)
    leader = next(i for i, hit in enumerate(hits) if len(hit.exact) == most)
    return [hits[leader], *hits[:leader], *hits[leader + 1 :]]
