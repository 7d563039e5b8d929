"""Score-based fusion, the alternative every peer offers next to RRF
(Qdrant DBSF, OpenSearch's min-max normalisation with an arithmetic
combination, Elasticsearch `linear`, Weaviate relative score).

Each channel's scores are put on [0, 1] over that channel's own list, then
summed with the channel weights; a chunk a channel did not return gets 0
from it. Unlike RRF this keeps *how much* better one hit is than the next
(a cosine of 0.9 against 0.5 counts more than rank 1 against rank 2), at the
price of depending on each list's score spread.

- `min_max`: (s − min) / (max − min) over the list.
- `dbsf` (distribution-based, as Qdrant): the list's mean ± 3 standard
  deviations are mapped to 0 and 1, clipped; one outlier then stretches the
  scale less than with min-max.

A list whose scores are all equal (one hit, say) gives each of them 1: no
hit in it is worse than another.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from enum import StrEnum

from services.core.models import ScoredChunk
from services.retriever.fusion import DEFAULT_RRF_K, ListFuser, RrfFuser


class FusionMethod(StrEnum):
    RRF = "rrf"
    MIN_MAX = "min_max"
    DBSF = "dbsf"


def normalized(scores: Sequence[float], method: FusionMethod) -> list[float]:
    """`scores` on [0, 1] by `method` (min_max or dbsf)."""
    if not scores:
        return []
    if method is FusionMethod.MIN_MAX:
        low, high = min(scores), max(scores)
    else:
        mean, spread = statistics.fmean(scores), statistics.pstdev(scores)
        low, high = mean - 3 * spread, mean + 3 * spread
    if not high > low:
        return [1.0] * len(scores)
    return [min(max((s - low) / (high - low), 0.0), 1.0) for s in scores]


class ScoreFuser(ListFuser):
    """Weighted sum of per-channel normalised scores (module docstring)."""

    def __init__(self, method: FusionMethod) -> None:
        if method is FusionMethod.RRF:
            raise ValueError("ScoreFuser normalises scores; RRF is RrfFuser")
        self.method = method

    def contributions(self, results: Sequence[ScoredChunk], weight: float) -> list[float]:
        scores = [r.score if math.isfinite(r.score) else 0.0 for r in results]
        return [weight * s for s in normalized(scores, self.method)]


def fuser_for(method: FusionMethod, rrf_k: float = DEFAULT_RRF_K) -> ListFuser:
    if method is FusionMethod.RRF:
        return RrfFuser(rrf_k)
    return ScoreFuser(method)
