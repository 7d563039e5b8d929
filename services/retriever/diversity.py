"""Diversity: Maximal Marginal Relevance over the final candidates, as
Qdrant (1.15+), OpenSearch and Weaviate offer it for vectors, here for the
hybrid ranking.

Greedily, the next hit is the one with the highest

    λ × relevance − (1 − λ) × (its highest cosine to a hit already taken)

over the first `window` candidates of the final order (after fusion,
boosts, reranking and exact-identifier precedence), using the chunks'
stored vectors. Relevance is by position, 1 for the first candidate down to
0 for the last of the window: rank is the one scale that fusion scores,
score fusion and rerank scores share. A candidate without a stored vector
is similar to nothing. Candidates past the window follow in their order.
λ = 1 is the plain ranking; lower λ trades relevance for novelty.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from services.core.deadline import Deadline
from services.core.errors import InvalidArgument, RagError
from services.retriever.types import FusedHit
from services.storage.base import VectorStore

DEFAULT_WINDOW = 50
MAX_WINDOW = 200
# Cap on reading the stored vectors: diversity is worth less than an answer.


@dataclass(frozen=True)
class Diversity:
    mmr_lambda: float = 0.0  # 0: off
    window: int = 0  # 0: DEFAULT_WINDOW

    def __bool__(self) -> bool:
        return self.mmr_lambda > 0.0


def check_diversity(diversity: Diversity) -> None:
    lam = diversity.mmr_lambda
    if not (math.isfinite(lam) and 0.0 <= lam <= 1.0):
        raise InvalidArgument(f"diversity.mmr_lambda: {lam} is outside 0..1")
    if not 0 <= diversity.window <= MAX_WINDOW:
        raise InvalidArgument(f"diversity.window: {diversity.window} is outside 0..{MAX_WINDOW}")


def mmr(
    hits: Sequence[FusedHit], vectors: Mapping[str, Sequence[float]], mmr_lambda: float, window: int
) -> list[FusedHit]:
    """`hits` with the first `window` reordered by MMR (module docstring)."""
    head, tail = list(hits[:window]), list(hits[window:])
    if len(head) < 3 or mmr_lambda >= 1.0:
        return [*head, *tail]
    matrix = _unit_rows(head, vectors)
    similarity = matrix @ matrix.T
    relevance = np.linspace(1.0, 0.0, num=len(head))
    chosen: list[int] = []
    closest = np.full(len(head), -np.inf)  # highest similarity to a chosen hit
    remaining = np.ones(len(head), dtype=bool)
    for _ in range(len(head)):
        penalty = np.where(np.isfinite(closest), closest, 0.0)
        gain = mmr_lambda * relevance - (1.0 - mmr_lambda) * penalty
        pick = int(np.argmax(np.where(remaining, gain, -np.inf)))  # ties: the earlier hit
        chosen.append(pick)
        remaining[pick] = False
        closest = np.maximum(closest, similarity[pick])
    return [head[i] for i in chosen] + tail


def _unit_rows(hits: Sequence[FusedHit], vectors: Mapping[str, Sequence[float]]) -> np.ndarray:
    """One unit-length row per hit; zeros (similar to nothing) where unknown."""
    dims = {len(v) for v in vectors.values()}
    dim = dims.pop() if len(dims) == 1 else 1
    rows = np.zeros((len(hits), dim), dtype=np.float64)
    for i, hit in enumerate(hits):
        vector = vectors.get(hit.chunk.chunk_id)
        if vector is not None and len(vector) == dim:
            row = np.asarray(vector, dtype=np.float64)
            norm = float(np.linalg.norm(row))
            rows[i] = row / norm if norm > 0 else row
    return rows


class DiversityStep:
    """Reads the window's stored vectors (one batched read under the
    request's deadline) and reorders it by MMR."""

    def __init__(self, vectors: VectorStore, executor: Executor, read_timeout_s: float) -> None:
        self.vectors, self.executor = vectors, executor
        # Cap on the vector read: diversity is worth less than an answer in time.
        self.read_timeout_s = read_timeout_s

    async def run(
        self, hits: list[FusedHit], diversity: Diversity, deadline: Deadline
    ) -> tuple[list[FusedHit], str]:
        """The diversified order, and a note saying what was done."""
        if not diversity or not hits:
            return hits, ""
        window = diversity.window or DEFAULT_WINDOW
        ids = [hit.chunk.chunk_id for hit in hits[:window]]
        # The store gets the step's own deadline: a server read ends when we stop waiting.
        within = deadline.capped(self.read_timeout_s)
        loop = asyncio.get_running_loop()
        read = loop.run_in_executor(self.executor, self.vectors.vectors, ids, within)
        try:
            found = await asyncio.wait_for(read, max(within.budget(), 0.001))
        except (TimeoutError, RagError, OSError) as exc:
            return hits, f"diversity skipped: stored vectors unavailable ({type(exc).__name__})"
        note = (
            f"diversity: MMR λ={diversity.mmr_lambda:g} over the first {len(ids)} candidates "
            f"({len(found)} with stored vectors)"
        )
        return mmr(hits, found, diversity.mmr_lambda, window), note
