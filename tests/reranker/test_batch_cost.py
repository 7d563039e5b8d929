"""Batch planning: how many pairs fit before a deadline (pure arithmetic)."""

from __future__ import annotations

import pytest

from services.reranker.batch_cost import BatchCostModel, BatchPlanner, TokenEstimator
from tests.support.clock import ManualClock

pytestmark = pytest.mark.unit

QUERY = "q" * 40


def calibrated_planner(batch_size: int = 8) -> BatchPlanner:
    """1 ms overhead + 0.01 ms per token, no headroom: a 256-token pair costs 2.56 ms."""
    cost = BatchCostModel(headroom=1.0)
    cost.calibrate(overhead_ms=1.0, tokens=1000, elapsed_ms=11.0)
    cost.observe(tokens=1000, elapsed_ms=11.0)  # a real batch confirms the warm-up
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


def test_a_batch_costs_its_pairs_padded_to_the_longest() -> None:
    planner = calibrated_planner()
    short, long = planner.pair_tokens(QUERY, "s" * 40), planner.pair_tokens(QUERY, "p" * 2000)
    assert (short, long) == (23, 256)
    assert planner.batch_ms([long]) == pytest.approx(1.0 + 2.56)
    assert planner.batch_ms([short, long, short]) == pytest.approx(1.0 + 3 * 2.56)
    assert planner.batch_ms([short, short]) == pytest.approx(1.0 + 2 * 0.23)
    assert planner.batch_ms([]) == 0.0


def test_uncalibrated_planner_predicts_nothing_until_it_has_seen_a_batch() -> None:
    planner = BatchPlanner(max_length=256, batch_size=8)
    assert planner.batch_ms([256]) is None
    planner.observe([256], elapsed_ms=5.0)
    assert planner.cost.calibrated
    assert planner.batch_ms([256]) == pytest.approx(1.5 * 5.0)  # the default headroom


def test_cost_rises_fast_and_falls_slowly() -> None:
    cost = BatchCostModel(rise=0.5, fall=0.1, headroom=1.0)
    cost.calibrate(overhead_ms=0.0, tokens=100, elapsed_ms=100.0)  # 1 ms/token
    cost.observe(tokens=100, elapsed_ms=100.0)  # a real batch confirms the warm-up
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


def test_relax_leans_back_towards_the_warm_up_cost_never_below() -> None:
    cost = BatchCostModel(rise=1.0, fall=0.5, headroom=1.0)
    cost.relax()  # nothing measured yet: nothing to do
    assert cost.ms_per_token is None
    cost.calibrate(overhead_ms=0.0, tokens=100, elapsed_ms=100.0)  # 1 ms/token at warm-up
    cost.observe(tokens=100, elapsed_ms=500.0)  # a slow batch on a busy machine
    assert cost.ms_per_token == pytest.approx(5.0)
    cost.relax()
    assert cost.ms_per_token == pytest.approx(3.0)
    for _ in range(50):
        cost.relax()
    assert cost.ms_per_token == pytest.approx(1.0)
    cost.observe(tokens=100, elapsed_ms=50.0)  # faster than the warm-up
    cost.relax()
    assert cost.ms_per_token == pytest.approx(0.75)  # relaxing never raises it


def test_a_warm_up_is_on_trial_until_a_real_batch_confirms_it() -> None:
    """Warmed up on a busy machine, the cost is 5x too high; the first real
    batch replaces it instead of nudging it down by `fall`."""
    cost = BatchCostModel(fall=0.2, headroom=1.0)
    assert not cost.trial_due()  # uncalibrated: predictions are None instead
    cost.calibrate(overhead_ms=0.0, tokens=100, elapsed_ms=500.0)  # 5 ms/token
    assert cost.trial_due() and not cost.confirmed
    cost.observe(tokens=100, elapsed_ms=100.0)  # 1 ms/token now
    assert cost.ms_per_token == pytest.approx(1.0) and cost.confirmed
    assert not cost.trial_due()
    cost.observe(tokens=100, elapsed_ms=0.0)  # confirmed: falls slowly again
    assert cost.ms_per_token == pytest.approx(0.8)


def test_refusing_calls_for_a_while_puts_the_cost_on_trial_again() -> None:
    clock = ManualClock()
    cost = BatchCostModel(rise=1.0, headroom=1.0, retrial_after_s=2.0, clock=clock)
    cost.calibrate(overhead_ms=0.0, tokens=100, elapsed_ms=100.0)
    cost.observe(tokens=100, elapsed_ms=100.0)
    cost.observe(tokens=100, elapsed_ms=3000.0)  # a burst of load: 30 ms/token
    cost.relax()  # a call refused
    clock.now += 1.9
    assert not cost.trial_due()
    clock.now += 0.2
    assert cost.trial_due()  # 2 s refusing with no batch run: try one
    cost.observe(tokens=100, elapsed_ms=120.0)  # the load is gone
    assert cost.ms_per_token == pytest.approx(1.2) and not cost.trial_due()
