"""One Rerank call's pairs while they wait for the shared model, and the
choice of which waiting pairs go into the next model batch.

A job's passages are scored in input order, so what it has at any moment is
a scored prefix: when it is answered early (its deadline) that prefix is its
partial result. `plan_batch` fills a batch pair by pair, always from the job
that has the fewest pairs scored or in the batch so far (oldest first on
ties): every waiting call gets its first pair into a batch before any gets
its second, so under load many calls get a few scores (partial) rather than
a few calls getting all of theirs and the rest nothing (timeouts). A pair
joins only while the batch is still predicted to finish before the deadline
of every call in it, so nobody's batch is made late by its neighbours.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from services.reranker.batch_cost import BatchPlanner

# Why a call scored fewer passages than it was given (`ScoreResult.stop_reason`).
# deadline: the time left could not fit its next pair (or a batch with its
# pairs was still running at the deadline); queue_timeout: nothing was scored
# because the model was busy with other calls' batches until too little time
# was left (saturation).
STOP_DEADLINE = "deadline"
STOP_QUEUE_TIMEOUT = "queue_timeout"


@dataclass(frozen=True)
class ScoreResult:
    """Scores in input order; when partial, only passages[0:scored] were scored."""

    scores: list[float]
    scored: int
    partial: bool
    stop_reason: str
    elapsed_ms: float


@dataclass(eq=False)
class ScoringJob:
    """One call's pairs in the scheduler. Mutated only under the scheduler's
    lock; `future` carries the result (or the model's error) to the caller."""

    query: str
    passages: list[str]
    pair_tokens: list[int]  # estimated tokens of each (query, passage) pair
    deadline: float | None  # time.monotonic() value; None: no deadline
    arrived: float
    seq: int  # arrival order
    scores: list[float] = field(default_factory=list)
    in_batch: int = 0  # pairs in the batch running now
    batches: int = 0  # batches its pairs went into
    finished: bool = False
    future: Future[ScoreResult] = field(default_factory=Future)

    @property
    def taken(self) -> int:
        """Pairs scored or being scored: the next pair to take is this one."""
        return len(self.scores) + self.in_batch

    @property
    def has_pairs_left(self) -> bool:
        return not self.finished and self.taken < len(self.passages)

    def remaining_ms(self, now: float) -> float:
        return math.inf if self.deadline is None else (self.deadline - now) * 1000

    def stop_reason_at_deadline(self) -> str:
        """Nothing scored and never in a batch: it waited out its time for the model."""
        return STOP_QUEUE_TIMEOUT if not self.scores and not self.batches else STOP_DEADLINE

    def finish(self, stop_reason: str, now: float) -> ScoreResult:
        """Close the job (first call wins) and hand its result to the caller."""
        if not self.finished:
            self.finished = True
            self._resolve(self._result(stop_reason, now))
        return self.future.result(timeout=0)

    def fail(self, error: BaseException) -> None:
        if not self.finished:
            self.finished = True
            with contextlib.suppress(InvalidStateError):  # cancelled by its caller
                self.future.set_exception(error)

    def _result(self, stop_reason: str, now: float) -> ScoreResult:
        partial = len(self.scores) < len(self.passages)
        return ScoreResult(
            scores=list(self.scores),
            scored=len(self.scores),
            partial=partial,
            stop_reason=stop_reason if partial else "",
            elapsed_ms=(now - self.arrived) * 1000,
        )

    def _resolve(self, result: ScoreResult) -> None:
        with contextlib.suppress(InvalidStateError):  # cancelled by its caller
            self.future.set_result(result)


@dataclass(frozen=True)
class PlannedBatch:
    """The pairs of the next model batch: (job, passage index), and the
    latest deadline among its jobs (what a backend may stop the batch at)."""

    entries: list[tuple[ScoringJob, int]]

    @property
    def jobs(self) -> list[ScoringJob]:
        return list(dict.fromkeys(job for job, _ in self.entries))

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [(job.query, job.passages[index]) for job, index in self.entries]

    @property
    def pair_tokens(self) -> list[int]:
        return [job.pair_tokens[index] for job, index in self.entries]

    def latest_deadline(self) -> float | None:
        deadlines = [job.deadline for job in self.jobs]
        if any(deadline is None for deadline in deadlines):
            return None
        return max(d for d in deadlines if d is not None)


def fits_alone(job: ScoringJob, planner: BatchPlanner, now: float) -> bool:
    """Could its next pair, in a batch of its own, still finish in time?"""
    remaining = job.remaining_ms(now)
    if remaining <= 0:
        return False
    predicted = planner.batch_ms([job.pair_tokens[job.taken]])
    if predicted is None or predicted <= remaining:  # uncalibrated: try one
        return True
    return _on_trial(job, planner)


def _on_trial(job: ScoringJob, planner: BatchPlanner) -> bool:
    """Its first pair is tried whatever the cost predicts: the cost itself
    is on trial (services.reranker.batch_cost)."""
    return not job.scores and planner.cost.trial_due()


def plan_batch(jobs: Sequence[ScoringJob], planner: BatchPlanner, now: float) -> PlannedBatch:
    """The next batch from the waiting `jobs` (in arrival order): fewest pairs
    taken first, each pair only if the batch still fits every deadline in it."""
    fill = _BatchFill(planner, now)
    waiting = [job for job in jobs if job.has_pairs_left]
    while not fill.full and (job := fill.next_job(waiting)) is not None:
        fill.offer(job)
    return PlannedBatch(fill.entries)


class _BatchFill:
    """A batch being filled, pair by pair."""

    def __init__(self, planner: BatchPlanner, now: float) -> None:
        self.planner, self.now = planner, now
        self.entries: list[tuple[ScoringJob, int]] = []
        self.added: Counter[int] = Counter()  # pairs of each job (by seq) in this batch
        self.passed_over: set[int] = set()  # jobs whose next pair does not fit
        self.tightest_ms = math.inf  # the least time left of any job in the batch

    @property
    def full(self) -> bool:
        return len(self.entries) >= self.planner.batch_size

    def next_index(self, job: ScoringJob) -> int:
        return job.taken + self.added[job.seq]

    def next_job(self, jobs: Sequence[ScoringJob]) -> ScoringJob | None:
        candidates = [
            job
            for job in jobs
            if job.seq not in self.passed_over and self.next_index(job) < len(job.passages)
        ]
        return min(candidates, key=lambda job: (self.next_index(job), job.seq), default=None)

    def offer(self, job: ScoringJob) -> None:
        """Add the job's next pair if the batch, with it, still fits every
        deadline in it; else leave the job out of this batch (a shorter pair
        of another job may still fit)."""
        index = self.next_index(job)
        limit_ms = min(self.tightest_ms, job.remaining_ms(self.now))
        tokens = [*(j.pair_tokens[i] for j, i in self.entries), job.pair_tokens[index]]
        predicted = self.planner.batch_ms(tokens)
        first = not self.entries
        if not _fits(predicted, limit_ms, first=first) and not (
            first and _on_trial(job, self.planner)
        ):
            self.passed_over.add(job.seq)
            return
        self.entries.append((job, index))
        self.added[job.seq] += 1
        self.tightest_ms = limit_ms


def _fits(predicted_ms: float | None, limit_ms: float, *, first: bool) -> bool:
    if math.isinf(limit_ms):
        return True  # nobody in the batch has a deadline
    if predicted_ms is None:
        return first  # not calibrated yet: one pair teaches the cost of the rest
    return predicted_ms <= limit_ms
