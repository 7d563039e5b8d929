"""Score-based fusion (services.retriever.score_fusion): hand-computed
normalisations, and how the order differs from RRF where the scores say
more than the ranks."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.retriever.fusion import RrfFuser
from services.retriever.score_fusion import FusionMethod, ScoreFuser, fuser_for, normalized
from services.retriever.types import Channel
from tests.retriever.factories import scored

pytestmark = pytest.mark.unit

V, L = Channel.VECTOR, Channel.LEXICAL


def test_min_max_maps_each_list_onto_zero_to_one() -> None:
    assert normalized([10.0, 6.0, 2.0], FusionMethod.MIN_MAX) == [1.0, 0.5, 0.0]
    assert normalized([3.0], FusionMethod.MIN_MAX) == [1.0]  # nothing is worse than itself
    assert normalized([], FusionMethod.MIN_MAX) == []


def test_dbsf_maps_mean_plus_minus_three_deviations_and_clips() -> None:
    scores = [4.0, 2.0, 2.0, 0.0]  # mean 2, population deviation sqrt(2)
    spread = math.sqrt(2.0)
    expected = [(s - (2 - 3 * spread)) / (6 * spread) for s in scores]
    assert normalized(scores, FusionMethod.DBSF) == pytest.approx(expected)
    assert normalized([1.0, 1.0], FusionMethod.DBSF) == [1.0, 1.0]


@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=60), st.sampled_from(["min_max", "dbsf"])
)
def test_normalised_scores_stay_in_range_and_keep_the_order(scores: list[float], how: str) -> None:
    out = normalized(scores, FusionMethod(how))
    assert all(0.0 <= s <= 1.0 for s in out)
    for i in range(len(scores) - 1):
        if scores[i] > scores[i + 1]:
            assert out[i] >= out[i + 1]


def test_score_fusion_weighs_how_much_better_not_only_which_is_better() -> None:
    # Vector: a far ahead. Lexical: a, b and c nearly tied, d far behind.
    vector = [scored("a", 0.90), scored("b", 0.30), scored("c", 0.29), scored("d", 0.28)]
    lexical = [scored("b", 5.0), scored("c", 4.99), scored("a", 4.98), scored("d", 0.0)]
    rrf = [h.chunk.chunk_id for h in RrfFuser().fuse({V: vector, L: lexical})]
    by_score = ScoreFuser(FusionMethod.MIN_MAX).fuse({V: vector, L: lexical})
    assert rrf == ["b", "a", "c", "d"]  # ranks alone: b's lexical first place wins
    assert [h.chunk.chunk_id for h in by_score] == ["a", "b", "c", "d"]
    a = by_score[0]
    assert a.fused_score == pytest.approx(1.0 + 4.98 / 5.0)
    assert [c.contribution for c in a.channels] == pytest.approx([1.0, 4.98 / 5.0])
    assert a.fused_score == sum(c.contribution for c in a.channels)


def test_weights_scale_each_channels_contribution() -> None:
    vector = [scored("x", 0.9), scored("y", 0.1)]
    lexical = [scored("y", 5.0), scored("x", 1.0)]
    fused = ScoreFuser(FusionMethod.MIN_MAX).fuse({V: vector, L: lexical}, {V: 1.0, L: 3.0})
    assert [h.chunk.chunk_id for h in fused] == ["y", "x"]
    assert [h.fused_score for h in fused] == pytest.approx([3.0, 1.0])


def test_fuser_for_picks_the_method() -> None:
    assert isinstance(fuser_for(FusionMethod.RRF, 10), RrfFuser)
    assert fuser_for(FusionMethod.RRF, 10).k == 10  # type: ignore[attr-defined]
    assert isinstance(fuser_for(FusionMethod.DBSF), ScoreFuser)
    with pytest.raises(ValueError):
        ScoreFuser(FusionMethod.RRF)
