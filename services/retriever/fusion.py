"""Reciprocal Rank Fusion and the post-fusion steps of the query path.

RRF combines ranked lists by rank alone, so a cosine similarity and a BM25
score never have to be put on one scale:

    score(chunk) = sum over lists containing it of  w_list / (k + rank)

with ranks starting at 1 and k = 60 by default. Ties are broken
deterministically (see `RrfFuser`), and every hit records where each channel
ranked it so responses can explain themselves.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.core.errors import ConfigError, InvalidArgument
from services.core.models import ScoredChunk, StoredChunk
from services.embedding.packaged_models import DEFAULT_RERANKER
from services.retriever.types import Channel, ChannelRank, FusedHit

DEFAULT_RRF_K = 60.0
DEFAULT_WEIGHT = 1.0
MAX_WEIGHT = 10.0

# Channels are always visited in this order, so the floating-point sum of a
# chunk's contributions (and the order of its recorded ranks) does not depend
# on the order of the caller's dict.
_CHANNEL_ORDER = tuple(Channel)


def validate_weights(
    weights: Mapping[Channel, float], *, max_weight: float = MAX_WEIGHT
) -> dict[Channel, float]:
    """Check per-channel weights: each finite in [0, max_weight], not all zero.

    Raises InvalidArgument naming the channel and the bad value. Channels not
    in `weights` are left out (the fuser treats them as DEFAULT_WEIGHT).
    """
    for channel, weight in weights.items():
        if not (math.isfinite(weight) and 0.0 <= weight <= max_weight):
            raise InvalidArgument(
                f"weights.{Channel(channel).value}: {weight!r} is outside 0..{max_weight:g}"
            )
    if weights and all(weight == 0.0 for weight in weights.values()):
        raise InvalidArgument("weights: must not all be 0 (nothing would be ranked)")
    return dict(weights)


@dataclasses.dataclass
class _Accumulator:
    chunk: StoredChunk
    score: float = 0.0
    channels: list[ChannelRank] = dataclasses.field(default_factory=list)


class ListFuser:
    """Fuses per-channel ranked lists: each channel adds a contribution per
    chunk (`contributions`, by the subclass), summed into its fused score.

    Tie-break, applied in order until two hits differ:
      1. higher fused score;
      2. found by more channels (agreement between retrievers);
      3. better (lower) best single-channel rank;
      4. chunk_id, ascending (arbitrary but stable across runs and machines).

    A chunk listed twice by one channel keeps its first (best) rank; the other
    ranks stay positional, i.e. as the store returned them. When channels
    return differing copies of a chunk, a copy with text wins over one without
    (a compact vector payload may omit the text).
    """

    def contributions(self, results: Sequence[ScoredChunk], weight: float) -> list[float]:
        """What each position of one channel's list adds to its chunk's score."""
        raise NotImplementedError

    def fuse(
        self,
        ranked: Mapping[Channel, Sequence[ScoredChunk]],
        weights: Mapping[Channel, float] | None = None,
    ) -> list[FusedHit]:
        """All chunks of all lists, best first, with per-channel provenance."""
        given = weights or {}
        # Checked over the lists fused and the weights given ("not all 0"
        # is about those, not a channel this index does not have).
        channel_weights = validate_weights(
            {
                channel: given.get(channel, DEFAULT_WEIGHT)
                for channel in _CHANNEL_ORDER
                if channel in ranked or channel in given
            }
        )
        fused: dict[str, _Accumulator] = {}
        for channel in _CHANNEL_ORDER:
            if channel in ranked:
                self._add_list(fused, channel, ranked[channel], channel_weights[channel])
        hits = [FusedHit(acc.chunk, acc.score, acc.channels) for acc in fused.values()]
        hits.sort(key=_tie_break_key)
        return hits

    def _add_list(
        self,
        fused: dict[str, _Accumulator],
        channel: Channel,
        results: Sequence[ScoredChunk],
        weight: float,
    ) -> None:
        seen: set[str] = set()
        contributions = self.contributions(results, weight)
        for rank, result in enumerate(results, start=1):
            chunk_id = result.chunk.chunk_id
            if chunk_id in seen:
                continue
            seen.add(chunk_id)
            acc = fused.get(chunk_id)
            if acc is None:
                acc = fused[chunk_id] = _Accumulator(result.chunk)
            elif acc.chunk.partial and not result.chunk.partial:  # keep the whole row
                acc.chunk = result.chunk
            contribution = contributions[rank - 1]
            acc.score += contribution
            acc.channels.append(ChannelRank(channel, rank, result.score, contribution))


class RrfFuser(ListFuser):
    """(Weighted) Reciprocal Rank Fusion: weight / (k + rank)."""

    def __init__(self, k: float = DEFAULT_RRF_K) -> None:
        if not (math.isfinite(k) and k >= 0):
            raise ConfigError(f"RRF k must be a finite number >= 0, got {k!r}")
        self.k = k

    def contributions(self, results: Sequence[ScoredChunk], weight: float) -> list[float]:
        return [weight / (self.k + rank) for rank in range(1, len(results) + 1)]


def _tie_break_key(hit: FusedHit) -> tuple[float, int, int, str]:
    best_rank = min((c.rank for c in hit.channels), default=0)
    return (-hit.fused_score, -len(hit.channels), best_rank, hit.chunk.chunk_id)


def cap_per_document(hits: Sequence[FusedHit], max_per_doc: int) -> list[FusedHit]:
    """Keep the order, but at most `max_per_doc` hits of any one page (`FusedHit.page`).

    Without a cap, one long page whose chunks all match crowds every other
    source out of the top results.
    """
    if max_per_doc < 1:
        raise InvalidArgument(f"max chunks per document must be at least 1, got {max_per_doc}")
    kept_per_doc: dict[tuple[str, str], int] = {}
    kept: list[FusedHit] = []
    for hit in hits:
        count = kept_per_doc.get(hit.page, 0)
        if count < max_per_doc:
            kept_per_doc[hit.page] = count + 1
            kept.append(hit)
    return kept


def drop_weak_vector_only(hits: Sequence[FusedHit], min_cosine: float) -> list[FusedHit]:
    """Drop hits found only by the vector channel with a cosine below `min_cosine`.

    Any hit with a lexical rank passes: an exact keyword match is evidence on
    its own, whatever the embedding thinks. `min_cosine == 0` turns this off.
    """
    if not (math.isfinite(min_cosine) and 0.0 <= min_cosine <= 1.0):
        raise InvalidArgument(f"minimum vector score must be in [0, 1], got {min_cosine!r}")
    if min_cosine == 0.0:
        return list(hits)
    return [hit for hit in hits if not _is_weak_vector_only(hit, min_cosine)]


def _is_weak_vector_only(hit: FusedHit, min_cosine: float) -> bool:
    vector = hit.rank_in(Channel.VECTOR)
    if vector is None or hit.rank_in(Channel.LEXICAL) is not None:
        return False
    return vector.score < min_cosine


@dataclass(frozen=True)
class RerankBlend:
    """How the final order combines the fused rank with the reranker's: a
    weighted reciprocal-rank fusion over the scored candidates,
    `fused_weight / (k + fused rank) + rerank_weight / (k + rerank rank)`
    (ranks 1-based among the scored), applied only when the reranker
    disagrees with fusion confidently enough: its best score must beat the
    score of the first scored candidate (in fused order) by at least `gate`,
    else the fused order stands. The scores are the model's logits, so the
    gate is a ratio of odds the model must see (2: about 7 to 1) before it
    overrules fusion, whatever the collection. Fitted on training queries
    only (bench.eval.rerank_rules; the values and their provenance are in
    FITTED_RERANK_BLEND). `fused_weight` 0 and `gate` 0 order by the
    reranker alone."""

    fused_weight: float = 0.0
    rerank_weight: float = 1.0
    k: float = 1.0
    gate: float = 0.0

    @staticmethod
    def disagreement(scores: Sequence[float]) -> float:
        """How far the reranker's best score (given in fused order) beats the first's."""
        return max(scores) - scores[0]

    def opens(self, scores: Sequence[float]) -> bool:
        """Whether these scores (in fused order) may reorder anything."""
        return len(scores) > 1 and self.disagreement(scores) >= self.gate

    def order(self, scores: Sequence[float]) -> list[int]:
        """Indices of `scores` (given in fused order) in blended order; ties
        keep the fused order, and so does a closed gate."""
        if not self.opens(scores):
            return list(range(len(scores)))
        by_score = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable
        rerank_rank = {index: rank for rank, index in enumerate(by_score, start=1)}
        blended = [
            self.fused_weight / (self.k + i + 1) + self.rerank_weight / (self.k + rerank_rank[i])
            for i in range(len(scores))
        ]
        return sorted(range(len(scores)), key=lambda i: -blended[i])


RERANK_ONLY = RerankBlend()
# Fitted by `python -m bench.eval.rerank_rules fit` (bench/results/rerank-rules-fit.json):
# rules of a grid (candidates x fused weight x k x gate) replayed with this module's ordering
# over the train splits of SciFact, the third-party documentation questions and the
# bilingual set, each as its eval asks, with the packaged ms-marco-MiniLM-L-12-v2's scores of
# the first 20 fused candidates; only rules of at most 5 candidates (what the rerank budget
# scores whole: `SERVABLE_CANDIDATES` there) admitted. Chosen: the most train MRR@10 gained
# over the three sets with no set's hit@1, MRR@10 or nDCG@10 below fusion alone. Refitted
# whenever what fusion puts first changes; the fourth fit (2026-12-04, after an unrelated
# language's list began to wait: services.retriever.locale_order) gave 4 candidates
# (RAG_RERANK_CANDIDATES), fused weight 0, k 1, gate 10: the model's own order, only when its
# best score beats the fused first's by 10 logits (train MRR@10 +0.0075 on third-party,
# SciFact and bilingual as fusion ranks them). The fits before it and why each was replaced:
# bench/results/notes/rerank_rule_fit.md, rerank_rule_third_fit.md, rerank_rule_fourth_fit.md.
FITTED_RERANK_BLEND = RerankBlend(fused_weight=0.0, rerank_weight=1.0, k=1.0, gate=10.0)


@dataclass(frozen=True)
class FittedRerank:
    """A reranking model's fitted rule: how many fused candidates it scores,
    and how its scores are blended with the fused order."""

    candidates: int
    blend: RerankBlend


# Each packaged reranking model's rule, fitted on its own scores by `python -m
# bench.eval.rerank_rules fit --model …`: the scores of two models are not on one
# scale (logits against sums of cosines), so neither can borrow the other's gate.
# ColBERT (2026-12-02, bench/results/rerank-rules-fit-answerai-colbert-small-v1.json): its
# scores of the first 10 fused candidates of every train question of the three sets, a grid of
# 1,080 rules (candidates 2-10, fused weight 0-4, k 1-30, gates 0-3 in its units), the one
# scoring the fewest candidates within 0.005 of the best summed train MRR@10 gain (+0.073,
# 10 candidates) with no set's train figure below fusion alone: 6 candidates, its own order
# behind a gate of 0.3. Test splits: SciFact nDCG@10 0.7018 -> 0.7159, third-party and
# bilingual as fusion ranks them (docs/benchmarks.md, "Late interaction as the reranker").
FITTED_RERANK = {
    DEFAULT_RERANKER: FittedRerank(4, FITTED_RERANK_BLEND),
    "packaged:answerai-colbert-small-v1": FittedRerank(
        6, RerankBlend(fused_weight=0.0, rerank_weight=1.0, k=1.0, gate=0.3)
    ),
}


def merge_rerank(
    hits: Sequence[FusedHit], scores: Sequence[float], blend: RerankBlend = RERANK_ONLY
) -> list[FusedHit]:
    """Apply reranker scores that belong to `hits[:len(scores)]`: the scored
    prefix in `blend` order, the unscored rest after it in fused order (see
    `place_reranked`, of which this is the prefix case)."""
    if len(scores) > len(hits):
        raise ValueError(f"{len(scores)} rerank scores for only {len(hits)} hits")
    return place_reranked(hits, dict(enumerate(scores)), blend)


def place_reranked(
    hits: Sequence[FusedHit], scores: Mapping[int, float], blend: RerankBlend = RERANK_ONLY
) -> list[FusedHit]:
    """`scores` maps positions in `hits` to the reranker's score. The scored
    hits are ordered by `blend` among the places they held; every unscored hit
    keeps its own place (a deadline-bound or language-bound reranker scores
    some candidates only, and what it did not read stays where fusion put it).
    The inputs are not modified. Raises ValueError on a position outside
    `hits` or a non-finite score: the reranker answered something else than
    what was asked."""
    order = reranked_order(len(hits), scores, blend)
    return [
        dataclasses.replace(hits[p], rerank_score=float(scores[p]), channels=list(hits[p].channels))
        if p in scores
        else hits[p]
        for p in order
    ]


def reranked_order(
    count: int, scores: Mapping[int, float], blend: RerankBlend = RERANK_ONLY
) -> list[int]:
    """The positions 0..count-1 in final order (`place_reranked` without the
    hits: the evaluation orders by the same code)."""
    bad = [score for score in scores.values() if not math.isfinite(score)]
    if bad:
        raise ValueError(f"rerank scores must be finite, got {bad[0]!r}")
    if any(not 0 <= position < count for position in scores):
        raise ValueError(f"rerank scores for positions outside the {count} hits")
    places = sorted(scores)
    order = list(range(count))
    ranked = blend.order([scores[p] for p in places])
    for place, index in zip(places, ranked, strict=True):
        order[place] = places[index]
    return order


# The second vector's RRF weight by its model (RAG_CROSS_LINGUAL_WEIGHT, where not set;
# any other model: 1). mUSE's 1 was measured against 0.5-2 (docs/benchmarks.md, "The
# cross-lingual channel's fusion weight"). bge-small-en, an English voice, on the train
# splits only (2026-12-02, docs/benchmarks.md, "A second English voice"): SciFact train
# hybrid nDCG@10 0.7195 (weight 0) -> 0.7383 (1) -> 0.7493 (2) -> 0.7614 (4); third-party
# train nDCG@10 0.654 (with mUSE instead) -> 0.664 (1) -> 0.663 (2) -> 0.666 (4).
FITTED_SECOND_WEIGHT = {"packaged:bge-small-en": 4.0}
