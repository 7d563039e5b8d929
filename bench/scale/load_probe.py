"""Vector searches timed while a bulk load runs, between its runs.

Why: during a load the Indexer defers HNSW builds (`OptimizeDue`,
`LOAD_BUILD_SHARE`), and the points not yet indexed are searched exactly, so a
Retrieve's vector search grows slower until the next build. The probe times
the store-level search a Retrieve makes (limit 50, the visibility filter, with
and without the 1% scope filter, payloads read) every few runs, next to the
shard's indexed and unindexed points, and once more after the load settles.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from services.storage.base import ScopeFilter, VectorQuery, unrequested_deadline
from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.factory import Storage

SEARCH_LIMIT = 50  # the vector channel's depth in the scale bench's Retrieves
PROBE_QUERIES = 30


@dataclass
class LoadProbe:
    """Every `every_runs` runs: `PROBE_QUERIES` searches per filter, their p50."""

    query_vectors: np.ndarray
    filter_scope: str
    every_runs: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    def after_run(self, storage: Storage, generation: int) -> None:
        if self.every_runs > 0 and generation % self.every_runs == 0:
            self.rows.append(self.measure(storage, generation))

    def settled(self, storage: Storage, generation: int) -> None:
        """The row after the load's last build."""
        self.rows.append({**self.measure(storage, generation), "settled": True})

    def measure(self, storage: Storage, generation: int) -> dict[str, Any]:
        vectors = storage.vectors
        if not isinstance(vectors, EdgeVectorStore):
            raise TypeError("the load probe reads an embedded (Qdrant Edge) vector store")
        progress = vectors.index_progress()
        scopes = {
            "none": ScopeFilter(visible_generation=generation),
            "1% scope": ScopeFilter(scope_id=self.filter_scope, visible_generation=generation),
        }
        return {
            "generation": generation,
            "points": progress.points,
            "unindexed": progress.unindexed,
            "search_p50_ms": {label: self._p50(vectors, scope) for label, scope in scopes.items()},
        }

    def _p50(self, vectors: EdgeVectorStore, scope: ScopeFilter) -> float:
        times = []
        for vector in self.query_vectors[:PROBE_QUERIES]:
            query = VectorQuery(vector, SEARCH_LIMIT, scope)
            started = time.perf_counter()
            vectors.search_many([query], unrequested_deadline())
            times.append((time.perf_counter() - started) * 1000)
        return round(statistics.median(times), 2)

    def record(self) -> dict[str, Any] | None:
        """The rows, the last one (`settled`) taken after the load's last build
        (None: no probe was asked for)."""
        if not self.rows:
            return None
        return {"every_runs": self.every_runs, "queries": PROBE_QUERIES, "rows": self.rows}
