"""Hits grouped by document, as OpenSearch's `collapse` and Qdrant's
`group_by` return them: `top_k` counts documents, each brings up to N of its
chunks (the per-document cap, `max_chunks_per_document`), and the documents
are ranked by their best chunk. The chunks of one document stay in rank
order and next to each other, so a client can render one result per page
with its best passages under it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

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
    by_document: dict[str, list[FusedHit]] = {}
    for hit in hits:
        members = by_document.setdefault(hit.chunk.doc_id, [])
        if len(members) < size:
            members.append(hit)
    chosen = list(by_document.values())[skip : skip + groups]
    return [
        replace(hit, group=rank) for rank, members in enumerate(chosen, skip + 1) for hit in members
    ]
