"""Which waiting pairs go into the next model batch (pure arithmetic on a
fixed clock), and what a call's result says when it is answered early."""

from __future__ import annotations

import itertools

import pytest

from services.reranker.batch_cost import BatchCostModel, BatchPlanner
from services.reranker.jobs import (
    STOP_DEADLINE,
    STOP_QUEUE_TIMEOUT,
    ScoringJob,
    fits_alone,
    plan_batch,
)

pytestmark = pytest.mark.unit

NOW = 100.0
QUERY = "q" * 40
LONG = "p" * 2000  # 256 tokens with the query: 1 + 2.56·k ms for k such pairs
SHORT = "s" * 200  # 63 tokens
_arrivals = itertools.count()


def calibrated_planner(batch_size: int = 8) -> BatchPlanner:
    """1 ms overhead + 0.01 ms per token, no headroom."""
    cost = BatchCostModel(headroom=1.0)
    cost.calibrate(overhead_ms=1.0, tokens=1000, elapsed_ms=11.0)
    cost.observe(tokens=1000, elapsed_ms=11.0)  # a real batch confirms the warm-up
    return BatchPlanner(max_length=256, batch_size=batch_size, cost=cost)


def job(
    planner: BatchPlanner,
    passages: list[str],
    remaining_ms: float | None = None,
    *,
    scored: int = 0,
) -> ScoringJob:
    """A waiting call with `scored` passages already scored."""
    deadline = None if remaining_ms is None else NOW + remaining_ms / 1000
    tokens = [planner.pair_tokens(QUERY, passage) for passage in passages]
    made = ScoringJob(QUERY, passages, tokens, deadline, NOW, next(_arrivals))
    made.scores = [0.0] * scored
    return made


def taken(planner: BatchPlanner, *jobs: ScoringJob) -> list[tuple[int, int]]:
    """The next batch as (which job, passage index) pairs."""
    batch = plan_batch(list(jobs), planner, NOW)
    return [(jobs.index(j), index) for j, index in batch.entries]


class TestOneCall:
    """Alone, a call gets what the old per-request planner gave it."""

    def test_without_deadline_the_configured_batch_size_is_used(self) -> None:
        planner = calibrated_planner(batch_size=8)
        assert len(taken(planner, job(planner, [LONG] * 20))) == 8
        assert len(taken(planner, job(planner, [LONG] * 3))) == 3

    @pytest.mark.parametrize(("remaining_ms", "size"), [(100.0, 8), (9.0, 3), (3.0, 0)])
    def test_batch_shrinks_to_what_fits(self, remaining_ms: float, size: int) -> None:
        planner = calibrated_planner(batch_size=8)
        assert len(taken(planner, job(planner, [LONG] * 8, remaining_ms))) == size

    def test_short_passages_fit_in_larger_batches_than_long_ones(self) -> None:
        planner = calibrated_planner(batch_size=8)
        short = taken(planner, job(planner, [SHORT] * 8, 12.0))
        long = taken(planner, job(planner, [LONG] * 8, 12.0))
        assert len(short) > len(long)

    def test_uncalibrated_planner_runs_a_single_pair_to_learn(self) -> None:
        planner = BatchPlanner(max_length=256, batch_size=8)
        assert len(taken(planner, job(planner, [LONG] * 8, 1000.0))) == 1
        assert len(taken(planner, job(planner, [LONG] * 8))) == 8  # no deadline: no risk

    def test_the_next_pairs_follow_the_scored_prefix(self) -> None:
        planner = calibrated_planner(batch_size=4)
        assert taken(planner, job(planner, [LONG] * 6, scored=3)) == [(0, 3), (0, 4), (0, 5)]


class TestSeveralCalls:
    def test_every_call_gets_its_next_pair_before_any_gets_a_second(self) -> None:
        planner = calibrated_planner(batch_size=5)
        a, b = job(planner, [LONG] * 5), job(planner, [LONG] * 5)
        assert taken(planner, a, b) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]

    def test_calls_with_fewer_scores_go_first(self) -> None:
        """Fairness across batches: a call that already has scores yields to one
        that has none, whatever their arrival order."""
        planner = calibrated_planner(batch_size=3)
        ahead, behind = job(planner, [LONG] * 8, scored=4), job(planner, [LONG] * 8)
        assert taken(planner, ahead, behind) == [(1, 0), (1, 1), (1, 2)]

    def test_the_batch_fits_the_tightest_deadline_in_it(self) -> None:
        """A call with time for one pair is served, alone: its neighbours'
        pairs would make the batch (and so its answer) late."""
        planner = calibrated_planner(batch_size=8)
        tight, ample = job(planner, [LONG] * 4, 6.0), job(planner, [LONG] * 4, 1000.0)
        assert taken(planner, tight, ample) == [(0, 0)]

    def test_a_pair_that_does_not_fit_lets_the_others_in(self) -> None:
        """The tight call arrived last: the ample one's pairs still fill the batch."""
        planner = calibrated_planner(batch_size=4)
        ample = job(planner, [LONG] * 4, 1000.0)
        tight = job(planner, [LONG] * 4, 3.0)  # not even one pair beside another
        assert taken(planner, ample, tight) == [(0, 0), (0, 1), (0, 2), (0, 3)]

    def test_finished_and_fully_taken_calls_are_skipped(self) -> None:
        planner = calibrated_planner(batch_size=8)
        done = job(planner, [LONG] * 2)
        done.finished = True
        busy = job(planner, [LONG] * 2)
        busy.in_batch = 2
        waiting = job(planner, [LONG] * 1)
        assert taken(planner, done, busy, waiting) == [(2, 0)]

    def test_the_batch_may_run_until_its_latest_deadline(self) -> None:
        planner = calibrated_planner(batch_size=8)
        early, late = job(planner, [SHORT], 50.0), job(planner, [SHORT], 80.0)
        assert plan_batch([early, late], planner, NOW).latest_deadline() == late.deadline
        endless = job(planner, [SHORT])
        assert plan_batch([early, endless], planner, NOW).latest_deadline() is None


class TestAnswer:
    def test_fits_alone_needs_time_for_one_more_pair(self) -> None:
        planner = calibrated_planner()
        assert fits_alone(job(planner, [LONG], 3.6), planner, NOW)
        assert not fits_alone(job(planner, [LONG], 3.5), planner, NOW)
        assert not fits_alone(job(planner, [LONG], 0.0), planner, NOW)
        assert fits_alone(job(planner, [LONG]), planner, NOW)

    def test_an_early_answer_is_the_scored_prefix_marked_partial(self) -> None:
        planner = calibrated_planner()
        call = job(planner, [LONG] * 3, 50.0)
        call.scores = [0.5, 0.25]
        result = call.finish(STOP_DEADLINE, NOW + 0.02)
        assert (result.scores, result.scored, result.partial) == ([0.5, 0.25], 2, True)
        assert result.stop_reason == STOP_DEADLINE
        assert result.elapsed_ms == pytest.approx(20.0)
        # The first answer stands: later scores and reasons change nothing.
        call.scores.append(1.0)
        assert call.finish("", NOW + 0.03) == result

    def test_a_complete_answer_has_no_stop_reason(self) -> None:
        planner = calibrated_planner()
        call = job(planner, [LONG])
        call.scores = [0.5]
        result = call.finish(STOP_DEADLINE, NOW)
        assert (result.partial, result.stop_reason) == (False, "")

    def test_nothing_scored_and_never_in_a_batch_is_a_queue_timeout(self) -> None:
        planner = calibrated_planner()
        call = job(planner, [LONG] * 3, 50.0)
        assert call.stop_reason_at_deadline() == STOP_QUEUE_TIMEOUT
        call.batches = 1  # its first batch was still running at the deadline
        assert call.stop_reason_at_deadline() == STOP_DEADLINE
