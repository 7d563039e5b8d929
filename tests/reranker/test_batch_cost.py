"""Batch planning: how many pairs fit before a deadline (pure arithmetic)."""

from __future__ import annotations

import pytest

from services.reranker.batch_cost import BatchCostModel, BatchPlanner, TokenEstimator

pytestmark = pytest.mark.unit

QUERY = "q" * 40


def calibrated_planner(batch_size: int = 8) -> BatchPlanner:
    """1 ms overhead + 0.01 ms per token, no headroom: a 256-token pair costs 2.56 ms."""
    cost = BatchCostModel(headroom=1.0)
    cost.calibrate(overhead_ms=1.0, tokens=1000, elapsed_ms=11.0)
    return BatchPlanner(max_length=256, batch_size=batch_size, cost=cost)


def test_token_estimate_is_capped_by_max_length() -> None:
    tokens = TokenEstimator(max_length=128)
    assert tokens.pair_tokens(40, 0) == 13
    assert tokens.pair_tokens(40, 400) == 113
    assert tokens.pair_tokens(40, 10_000) == 128


def test_padded_tokens_follow_the_longest_passage() -> None:
    tokens = TokenEstimator(max_length=512)
    assert tokens.padded_batch_tokens(QUERY, ["a" * 400, "b" * 40, "c"]) == 3 * 113
    assert tokens.padded_batch_tokens(QUERY, []) == 0


def test_without_deadline_the_configured_batch_size_is_used() -> None:
    planner = calibrated_planner(batch_size=8)
    assert planner.next_batch_size(QUERY, ["p" * 2000] * 20, None) == 8
    assert planner.next_batch_size(QUERY, ["p" * 2000] * 3, None) == 3


def test_batch_shrinks_to_what_fits_and_stops_when_nothing_does() -> None:
    planner = calibrated_planner(batch_size=8)
    long_passages = ["p" * 2000] * 8  # 256 tokens each: 1 + 2.56·k ms for k pairs
    assert planner.next_batch_size(QUERY, long_passages, remaining_ms=100.0) == 8
    assert planner.next_batch_size(QUERY, long_passages, remaining_ms=9.0) == 3
    assert planner.next_batch_size(QUERY, long_passages, remaining_ms=3.0) == 0
    assert planner.next_batch_size(QUERY, long_passages, remaining_ms=-1.0) == 0


def test_short_passages_fit_in_larger_batches_than_long_ones() -> None:
    planner = calibrated_planner(batch_size=8)
    budget = 12.0
    short = planner.next_batch_size(QUERY, ["s" * 200] * 8, budget)
    long = planner.next_batch_size(QUERY, ["p" * 2000] * 8, budget)
    assert short > long


def test_uncalibrated_planner_runs_a_single_pair_to_learn() -> None:
    planner = BatchPlanner(max_length=256, batch_size=8)
    assert planner.next_batch_size(QUERY, ["p"] * 8, remaining_ms=1000.0) == 1
    planner.observe(QUERY, ["p" * 2000], elapsed_ms=5.0)
    assert planner.cost.calibrated


def test_cost_rises_fast_and_falls_slowly() -> None:
    cost = BatchCostModel(rise=0.5, fall=0.1, headroom=1.0)
    cost.calibrate(overhead_ms=0.0, tokens=100, elapsed_ms=100.0)  # 1 ms/token
    cost.observe(tokens=100, elapsed_ms=300.0)
    assert cost.ms_per_token == pytest.approx(2.0)
    cost.observe(tokens=100, elapsed_ms=0.0)
    assert cost.ms_per_token == pytest.approx(1.8)
    assert cost.predict_ms(10) == pytest.approx(18.0)


def test_headroom_inflates_predictions() -> None:
    cost = BatchCostModel(headroom=1.5)
    assert cost.predict_ms(10) is None
    cost.calibrate(overhead_ms=2.0, tokens=10, elapsed_ms=12.0)
    assert cost.predict_ms(10) == pytest.approx(1.5 * 12.0)


def test_weights_outside_unit_interval_are_rejected() -> None:
    with pytest.raises(ValueError, match="rise"):
        BatchCostModel(rise=0.0)
