"""Boosts after fusion: recency decay on a document's `updated_at` and
metadata-equality boosts, as Elasticsearch's decay functions and Qdrant's
formula queries offer them.

Each hit's fused score is multiplied by

    1 + recency.weight × decay(age) + Σ weight of each metadata boost it matches

so a boost never turns a weak match into a strong one on its own (a hit
with no relevance stays at none) and the same weights mean the same thing
under RRF and score fusion. The candidates are then sorted again by the
boosted score. With the reranker on, its window is then ordered by the
cross-encoder's relevance alone: boosts decide which candidates reach it
and the order of everything after it (`disable_rerank` makes them decide
the whole order).

`decay(age)`, with `d = max(0, |age| − offset)` in days and the factor
`decay` reached at `d = scale` (Elasticsearch's definitions, distance from
`origin` on either side):

- exp:    decay ** (d / scale)
- gauss:  decay ** ((d / scale) ** 2)
- linear: max(0, 1 − (1 − decay) × d / scale)

A document without `updated_at` gets no recency boost. One dated after
`origin` decays by its distance too: a page dated in the year 2999 (a typo, a
clock gone wrong, or a writer pinning its pages) is not the newest page
forever. Ages are measured from `origin` (default: the time of the first
page, carried by its page token).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from services.core.errors import InvalidArgument
from services.core.field_rules import MAX_BOOST_DAYS, MAX_BOOST_WEIGHT, parse_rfc3339
from services.retriever.types import FusedHit

MAX_METADATA_BOOSTS = 16
MAX_DAYS = MAX_BOOST_DAYS
_SECONDS_PER_DAY = 86_400.0


class DecayFunction(StrEnum):
    EXP = "exp"
    GAUSS = "gauss"
    LINEAR = "linear"


@dataclass(frozen=True)
class RecencyBoost:
    weight: float
    scale_days: float
    offset_days: float = 0.0
    decay: float = 0.5
    function: DecayFunction = DecayFunction.EXP
    origin: datetime | None = None  # None: now (the first page's time)

    def factor(self, age_days: float) -> float:
        """decay(age) in [0, 1] (module docstring)."""
        distance = max(0.0, age_days - self.offset_days) / self.scale_days
        if self.function is DecayFunction.EXP:
            return float(self.decay**distance)
        if self.function is DecayFunction.GAUSS:
            return float(self.decay ** (distance * distance))
        return max(0.0, 1.0 - (1.0 - self.decay) * distance)


@dataclass(frozen=True)
class MetadataBoost:
    key: str
    value: str
    weight: float


@dataclass(frozen=True)
class Boosts:
    recency: RecencyBoost | None = None
    metadata: tuple[MetadataBoost, ...] = ()

    def __bool__(self) -> bool:
        return self.recency is not None or bool(self.metadata)

    def recency_origin(self) -> datetime | None:
        return self.recency.origin if self.recency is not None else None


def check_boosts(boosts: Boosts) -> None:
    """InvalidArgument naming the field and its bounds."""
    if len(boosts.metadata) > MAX_METADATA_BOOSTS:
        raise InvalidArgument(
            f"boosts.metadata: {len(boosts.metadata)} entries, limit is {MAX_METADATA_BOOSTS}"
        )
    for index, boost in enumerate(boosts.metadata):
        _check_weight(f"boosts.metadata[{index}].weight", boost.weight)
        if not boost.key:
            raise InvalidArgument(f"boosts.metadata[{index}].key: empty")
    recency = boosts.recency
    if recency is None:
        return
    _check_weight("boosts.recency.weight", recency.weight)
    _check_range("boosts.recency.scale_days", recency.scale_days, 0, MAX_DAYS, low_open=True)
    _check_range("boosts.recency.offset_days", recency.offset_days, 0, MAX_DAYS)
    if not (math.isfinite(recency.decay) and 0 < recency.decay < 1):
        raise InvalidArgument(f"boosts.recency.decay: {recency.decay} is outside (0, 1)")


def _check_range(field: str, value: float, low: float, high: float, low_open: bool = False) -> None:
    above = value > low if low_open else value >= low
    if not (math.isfinite(value) and above and value <= high):
        bounds = f"({low:g}, {high:g}]" if low_open else f"{low:g}..{high:g}"
        raise InvalidArgument(f"{field}: {value} is outside {bounds}")


def _check_weight(field: str, weight: float) -> None:
    if not (math.isfinite(weight) and 0 < weight <= MAX_BOOST_WEIGHT):
        raise InvalidArgument(f"{field}: {weight} is outside (0, {MAX_BOOST_WEIGHT:g}]")


def apply_boosts(
    hits: Sequence[FusedHit],
    boosts: Boosts,
    updated_at: Mapping[tuple[str, str], str],
    origin: datetime,
) -> list[FusedHit]:
    """`hits` with each boost multiplier and its reasons, best boosted first
    (equal boosted scores keep their order). `updated_at`: per (doc_id,
    locale), RFC 3339."""
    boosted = [_boosted(hit, boosts, updated_at, origin) for hit in hits]
    return sorted(boosted, key=lambda hit: -hit.fused_score * hit.boost)


def _boosted(
    hit: FusedHit, boosts: Boosts, updated_at: Mapping[tuple[str, str], str], origin: datetime
) -> FusedHit:
    extra, reasons = 0.0, []
    if boosts.recency is not None:
        stamp = updated_at.get((hit.chunk.doc_id, hit.chunk.locale), "")
        age = _age_days(stamp, origin)
        if age is not None:
            gain = boosts.recency.weight * boosts.recency.factor(abs(age))
            extra += gain
            when = f"{age:.1f} days old" if age >= 0 else f"{-age:.1f} days ahead"
            reasons.append(f"recency +{gain:.3g} (updated {stamp}, {when})")
    for boost in boosts.metadata:
        if hit.chunk.metadata.get(boost.key) == boost.value:
            extra += boost.weight
            reasons.append(f"metadata {boost.key}={boost.value} +{boost.weight:g}")
    return replace(hit, boost=1.0 + extra, boost_reasons=tuple(reasons))


def _age_days(stamp: str, origin: datetime) -> float | None:
    if not stamp:
        return None
    # Every form the Indexer accepts (services.core.field_rules): a full-date,
    # a leap second, a lower-case "t"/"z" once got no recency boost at all.
    when = parse_rfc3339(stamp, date_only=True)
    if when is not None and when.tzinfo is None:  # a full-date: its midnight, UTC
        when = when.replace(tzinfo=UTC)
    elif when is None:  # stored before that rule: read as it was then
        try:
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return None
    if when.tzinfo is None or origin.tzinfo is None:
        return None
    return (origin - when).total_seconds() / _SECONDS_PER_DAY  # < 0: dated after origin
