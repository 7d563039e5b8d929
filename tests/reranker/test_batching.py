"""BatchScheduler: concurrent calls share forward passes, each answered by its
own deadline with its scored prefix. The model here is a fake (`FakeModel`)
and time is a fake clock that only the fake model moves, so no assertion
depends on how fast the machine is."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

from services.core.errors import Unavailable
from services.reranker.batch_cost import BatchCostModel, BatchPlanner
from services.reranker.batching import BatchScheduler, NoObserver
from services.reranker.jobs import STOP_DEADLINE, STOP_QUEUE_TIMEOUT, ScoringJob

pytestmark = pytest.mark.unit

GENEROUS_S = 30.0  # only ever waited out when a test is broken
MS_PER_PAIR = 10.0
PASSAGE = "p" * 2000  # every pair the same 256 tokens: cost is per pair


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


class FakeModel:
    """A fake cross-encoder (test-only): it counts forward passes, records the
    pairs of each, injects slowness by moving the fake clock `MS_PER_PAIR`
    per pair, and can hold a pass at a gate (`hold_from`: the first pass held,
    1-based). A pair's score depends on its own text only, as a real
    cross-encoder's does, so scores can be compared with scoring alone."""

    def __init__(self, clock: FakeClock, hold_from: int = 0) -> None:
        self.clock = clock
        self.batches: list[list[tuple[str, str]]] = []
        self.hold_from = hold_from
        self.gate = threading.Event()
        self.held = threading.Event()  # a pass is waiting at the gate
        self.error: Exception | None = None

    def __call__(self, pairs: Sequence[tuple[str, str]], deadline: float | None) -> list[float]:
        self.batches.append(list(pairs))
        if self.hold_from and len(self.batches) >= self.hold_from:
            self.held.set()
            assert self.gate.wait(GENEROUS_S)
        self.clock.advance(MS_PER_PAIR * len(pairs) / 1000)
        if self.error is not None:
            raise self.error
        return [score_of(query, passage) for query, passage in pairs]


def score_of(query: str, passage: str) -> float:
    return float(sum(map(ord, query + passage)) % 997)


class Recorder(NoObserver):
    """Records what the scheduler reports (test-only observer)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int]] = []
        self.waits: list[float] = []
        self.stops: list[str] = []

    def batch_scored(self, pairs: int, requests: int) -> None:
        self.batches.append((pairs, requests))

    def queue_waited(self, seconds: float) -> None:
        self.waits.append(seconds)

    def stopped_early(self, stop_reason: str) -> None:
        self.stops.append(stop_reason)


class Setup:
    def __init__(
        self,
        batch_size: int,
        hold_from: int = 0,
        warm_up_ms: float = MS_PER_PAIR,
        confirmed: bool = True,
    ) -> None:
        self.clock = FakeClock()
        self.model = FakeModel(self.clock, hold_from)
        self.observer = Recorder()
        self.model_lock = threading.Lock()
        # 0 overhead, MS_PER_PAIR per 256-token pair, confirmed by a real batch
        cost = BatchCostModel(headroom=1.0, clock=self.clock)
        cost.calibrate(overhead_ms=0.0, tokens=256, elapsed_ms=warm_up_ms)
        if confirmed:
            cost.observe(tokens=256, elapsed_ms=MS_PER_PAIR)
        planner = BatchPlanner(max_length=256, batch_size=batch_size, cost=cost)
        self.scheduler = BatchScheduler(
            self.model, planner, self.model_lock, observer=self.observer, clock=self.clock
        )

    def submit(self, name: str, count: int, remaining_ms: float | None = None) -> ScoringJob:
        deadline = None if remaining_ms is None else self.clock() + remaining_ms / 1000
        return self.scheduler.submit(name, passages(count), deadline)

    @contextmanager
    def model_busy(self) -> Iterator[None]:
        """Hold the model (as a running batch would) so that calls queue up."""
        assert self.model_lock.acquire(timeout=GENEROUS_S)
        try:
            yield
        finally:
            self.model_lock.release()


def passages(count: int) -> list[str]:
    return [f"{i:02d}{PASSAGE}"[:2000] for i in range(count)]


def answer(job: ScoringJob) -> list[float]:
    result = job.future.result(timeout=GENEROUS_S)
    assert not result.partial
    return result.scores


def alone(name: str, count: int) -> list[float]:
    return [score_of(name, passage) for passage in passages(count)]


@pytest.fixture
def setup() -> Iterator[Setup]:
    made = Setup(batch_size=8)
    yield made
    made.scheduler.close()


def test_a_call_alone_runs_at_once_in_batches_of_its_own() -> None:
    setup = Setup(batch_size=2)
    job = setup.submit("a", 5)
    assert answer(job) == alone("a", 5)
    assert [len(batch) for batch in setup.model.batches] == [2, 2, 1]
    assert setup.observer.batches == [(2, 1), (2, 1), (1, 1)]


def test_calls_waiting_for_the_model_share_its_next_forward_pass(setup: Setup) -> None:
    with setup.model_busy():
        jobs = {name: setup.submit(name, count) for name, count in [("a", 3), ("b", 2), ("c", 4)]}
    for name, job in jobs.items():
        assert answer(job) == alone(name, len(job.passages))
    # One pass of 8 pairs (every call's first, then second, ...) and one of the rest;
    # alone, they would have taken three passes.
    assert setup.observer.batches == [(8, 3), (1, 1)]
    assert [q for q, _ in setup.model.batches[0]] == ["a", "b", "c", "a", "b", "c", "a", "c"]
    stats = setup.scheduler.stats()
    assert (stats.batches, stats.pairs, stats.shared_batches, stats.most_requests) == (2, 9, 1, 3)
    assert stats.waiting == 0


def test_shared_batches_stay_within_the_batch_size() -> None:
    setup = Setup(batch_size=4)
    with setup.model_busy():
        jobs = [setup.submit(name, 4) for name in "abcd"]
    for name, job in zip("abcd", jobs, strict=True):
        assert answer(job) == alone(name, 4)
    assert [len(batch) for batch in setup.model.batches] == [4, 4, 4, 4]
    assert all(requests == 4 for _, requests in setup.observer.batches)


def test_a_deadline_that_cannot_fit_gets_the_scored_prefix_in_time() -> None:
    """45 ms for 10 pairs at 10 ms each, two per batch: two batches fit, the
    third would end at 60 ms, so the call is answered at 40 ms with 4 scores."""
    setup = Setup(batch_size=2)
    started = setup.clock()
    job = setup.submit("a", 10, remaining_ms=45.0)
    result = job.future.result(timeout=GENEROUS_S)
    assert (result.scored, result.partial, result.stop_reason) == (4, True, STOP_DEADLINE)
    assert result.scores == alone("a", 4)
    assert setup.clock() - started == pytest.approx(0.040)  # no batch ran past the deadline
    assert result.elapsed_ms <= 45.0
    assert setup.observer.stops == [STOP_DEADLINE]


def test_a_tight_call_is_not_made_late_by_its_neighbours(setup: Setup) -> None:
    """15 ms left: one pair fits, a shared batch of two would not; the call is
    served alone first, the ample one after it."""
    with setup.model_busy():
        tight = setup.submit("tight", 3, remaining_ms=15.0)
        ample = setup.submit("ample", 2)
    result = tight.future.result(timeout=GENEROUS_S)
    assert (result.scored, result.stop_reason) == (1, STOP_DEADLINE)
    assert answer(ample) == alone("ample", 2)
    assert [len(batch) for batch in setup.model.batches] == [1, 2]


def test_a_call_that_waited_out_its_time_behind_others_is_a_queue_timeout(setup: Setup) -> None:
    with setup.model_busy():
        waiting = setup.submit("waiting", 3, remaining_ms=30.0)
        setup.clock.advance(0.050)  # the model stays busy past its deadline
    result = waiting.future.result(timeout=GENEROUS_S)
    assert (result.scored, result.partial, result.stop_reason) == (0, True, STOP_QUEUE_TIMEOUT)
    assert setup.model.batches == []
    assert setup.observer.stops == [STOP_QUEUE_TIMEOUT]
    assert setup.observer.waits == [pytest.approx(0.050)]  # the wait that gave up, counted


def test_out_of_time_on_arrival_is_answered_at_once_without_the_model(setup: Setup) -> None:
    job = setup.submit("late", 3, remaining_ms=5.0)  # one pair needs 10 ms
    assert job.future.done()
    result = job.future.result()
    assert (result.scored, result.stop_reason) == (0, STOP_DEADLINE)
    assert setup.model.batches == [] and setup.observer.waits == []


def test_a_cost_inflated_by_slow_batches_does_not_lock_reranking_out(setup: Setup) -> None:
    """After batches 30 times slower than the warm-up's, no call seems to have
    time for a pair and nothing would run to say otherwise: each refusal
    leans the cost back towards the warm-up's, until calls are served again."""
    cost = setup.scheduler.planner.cost
    cost.observe(tokens=256, elapsed_ms=30 * MS_PER_PAIR)
    assert cost.predict_ms(256) == pytest.approx((1 + 0.7 * 29) * MS_PER_PAIR)
    refused = 0
    while (job := setup.submit("a", 1, remaining_ms=5 * MS_PER_PAIR)).future.done():
        refused += 1
        assert refused < 20, "never admitted again"
    assert refused > 0 and answer(job) == alone("a", 1)


def test_a_warm_up_measured_on_a_busy_machine_does_not_lock_reranking_out() -> None:
    """The warm-up ran while the machine was busy (30 times the real cost), so
    no call seems to have time for one pair. The first call gets its first
    pair tried anyway; that batch's measurement replaces the cost, and the
    next call is served whole. (Before: every call refused, for good.)"""
    setup = Setup(batch_size=8, warm_up_ms=30 * MS_PER_PAIR, confirmed=False)
    try:
        first = setup.submit("a", 3, remaining_ms=15 * MS_PER_PAIR)
        result = first.future.result(timeout=GENEROUS_S)
        assert result.scored >= 1 and len(setup.model.batches[0]) == 1  # one pair tried
        assert setup.scheduler.planner.cost.ms_per_token == pytest.approx(MS_PER_PAIR / 256)
        assert answer(setup.submit("b", 4, remaining_ms=15 * MS_PER_PAIR)) == alone("b", 4)
    finally:
        setup.scheduler.close()


def test_giving_up_at_the_deadline_keeps_the_prefix_and_drops_later_scores() -> None:
    setup = Setup(batch_size=2, hold_from=2)
    job = setup.submit("a", 4, remaining_ms=10_000.0)
    assert setup.model.held.wait(GENEROUS_S)  # its second batch is running
    result = setup.scheduler.give_up(job)
    assert (result.scores, result.partial, result.stop_reason) == (alone("a", 2), True, "deadline")
    setup.model.gate.set()
    other = setup.submit("b", 1)
    assert answer(other) == alone("b", 1)
    assert job.future.result() == result  # the late batch changed nothing
    setup.scheduler.close()


def test_a_model_error_fails_the_calls_in_that_batch_and_the_next_calls_are_served(
    setup: Setup,
) -> None:
    setup.model.error = RuntimeError("tokenizer exploded")
    with setup.model_busy():
        first, second = setup.submit("a", 2), setup.submit("b", 2)
    for job in (first, second):
        with pytest.raises(RuntimeError, match="tokenizer exploded"):
            job.future.result(timeout=GENEROUS_S)
    setup.model.error = None
    assert answer(setup.submit("c", 2)) == alone("c", 2)


def test_close_answers_waiting_calls_unavailable_and_refuses_new_ones(setup: Setup) -> None:
    with setup.model_busy():
        waiting = setup.submit("a", 2)
        setup.scheduler.close()
    with pytest.raises(Unavailable, match="stopping"):
        waiting.future.result(timeout=GENEROUS_S)
    with pytest.raises(Unavailable, match="stopping"):
        setup.submit("b", 1)


async def test_wait_async_answers_by_the_deadline_while_the_model_is_busy() -> None:
    """Real clock, model held throughout: whenever the wait ends, nothing can
    have been scored, so the answer is the empty prefix, not an error."""
    planner = BatchPlanner(max_length=256, batch_size=8)
    model_lock = threading.Lock()
    scheduler = BatchScheduler(FakeModel(FakeClock()), planner, model_lock)
    assert model_lock.acquire(timeout=GENEROUS_S)
    try:
        job = scheduler.submit("a", passages(3), deadline=time.monotonic() + 0.05)
        result = await scheduler.wait_async(job)
    finally:
        model_lock.release()
        scheduler.close()
    assert (result.scored, result.partial, result.stop_reason) == (0, True, STOP_QUEUE_TIMEOUT)


async def test_a_cancelled_caller_leaves_the_queue(setup: Setup) -> None:
    with setup.model_busy():
        job = setup.submit("a", 3)
        waiter = asyncio.ensure_future(setup.scheduler.wait_async(job))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert job.finished and setup.scheduler.stats().waiting == 0
    assert setup.model.batches == []
