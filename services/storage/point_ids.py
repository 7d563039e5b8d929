"""Vector point ids: Qdrant accepts only ints or UUIDs, chunks have hex ids.

The derivation is part of the on-disk format (every Qdrant adapter and the
`verify` audit must agree on it), so it lives with the stores, not with the
Indexer that mints chunk ids.
"""

from __future__ import annotations

import uuid

# A fixed namespace so point UUIDs are reproducible across machines.
_POINT_NAMESPACE = uuid.UUID("6f1c0d2e-3b7a-5c49-9e2d-1a8b4c7d9e10")


def point_uuid(chunk_id: str) -> str:
    """The Qdrant point id of a chunk, derived deterministically from its id."""
    return str(uuid.uuid5(_POINT_NAMESPACE, chunk_id))
