"""A page of the final ranking: `top_k` hits from an offset, or `top_k`
documents' groups.

Hits grouped by document, as OpenSearch's `collapse` and Qdrant's
`group_by` return them: `top_k` counts documents, each brings up to N of its
chunks (the per-document cap, `max_chunks_per_document`), and the documents
are ranked by their best chunk. The chunks of one document stay in rank
order and next to each other, so a client can render one result per page
with its best passages under it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from services.retriever.types import FusedHit

# Chunks per group: a group is one result on a page; ten passages of one
# page are already more than a reader scans.
MAX_GROUP_SIZE = 10


def group_by_document(
    hits: Sequence[FusedHit], groups: int, size: int, skip: int = 0
) -> list[FusedHit]:
    """The `groups` documents of the ranking after the first `skip`, each with
    up to `size` of its chunks; every hit numbered with its document's group
    rank (counted from the first document of the ranking)."""
    by_document: dict[tuple[str, str], list[FusedHit]] = {}
    for hit in hits:
        members = by_document.setdefault(hit.page, [])
        if len(members) < size:
            members.append(hit)
    chosen = list(by_document.values())[skip : skip + groups]
    return [
        replace(hit, group=rank) for rank, members in enumerate(chosen, skip + 1) for hit in members
    ]


@dataclass(frozen=True)
class Page:
    hits: list[FusedHit]
    hits_before: int  # hits of the ranking shown on earlier pages (ranks follow on)
    next_offset: int | None  # where the next page starts; None: this is the last
    next_token: str = ""  # the signed token of the next page ("": this is the last)


def page_of(hits: Sequence[FusedHit], offset: int, size: int, group_size: int = 0) -> Page:
    """The page starting at `offset` (hits, or documents when `group_size`)."""
    end = offset + size
    if not group_size:
        return Page(list(hits[offset:end]), offset, end if end < len(hits) else None)
    documents = len({hit.page for hit in hits})
    before = len(group_by_document(hits, offset, group_size))
    page = group_by_document(hits, size, group_size, skip=offset)
    return Page(page, before, end if end < documents else None)
