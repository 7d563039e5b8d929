"""Cross-request batching: the pairs of every waiting Rerank call share the
model's forward passes.

One thread runs the model (one forward pass already uses every core, and
Hugging Face fast tokenizers are not safe for concurrent calls). Calls put
their pairs in; before each forward pass that thread takes the next batch
from *all* waiting calls (`jobs.plan_batch`): up to the configured batch
size, every call's next pair before anyone's second, and only pairs that
keep the batch predicted (`BatchCostModel`) to finish before the deadline
of every call in it. A call that finds the model idle runs at once, alone:
no timer, no added latency when calls do not overlap.

Each call is answered when its last pair is scored, when the scheduler sees
that not even one more pair of it can finish in time, or at its deadline at
the latest (its waiter stops waiting), with the scored prefix marked
partial: never late, whatever the backend. A batch still running at that
moment is not wasted: the other calls in it get their scores.

Why not `services.core.coalescing.Coalescer`: it hands each caller's items
to one call whole, counts items rather than padded tokens, and has no
deadlines: a 20-pair request would overflow the batch size or hold a whole
batch, and a follower could wait past its deadline. Reranking needs the
batch planned pair by pair against every caller's deadline, and a partial
answer at each caller's own deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from services.core.errors import Unavailable
from services.core.logging import get_logger
from services.reranker.backends import BatchInterrupted
from services.reranker.batch_cost import BatchPlanner
from services.reranker.jobs import (
    STOP_DEADLINE,
    PlannedBatch,
    ScoreResult,
    ScoringJob,
    fits_alone,
    plan_batch,
)

log = get_logger(__name__)

# Runs one model batch: (query, passage) pairs and the latest deadline of the
# calls in it (a backend may abandon the batch then: `BatchInterrupted`).
RunBatch = Callable[[Sequence[tuple[str, str]], float | None], list[float]]
Clock = Callable[[], float]


class ScoringObserver(Protocol):
    """Told what scoring does, from the scoring threads (so: thread-safe)."""

    def batch_scored(self, pairs: int, requests: int) -> None:
        """A model batch of `pairs` pairs from `requests` calls completed."""

    def queue_waited(self, seconds: float) -> None:
        """A call waited this long for the model before its first batch (or gave up)."""

    def stopped_early(self, stop_reason: str) -> None:
        """A call returned fewer scores than passages, for this reason."""

    def model_ready(self, ready: bool) -> None:
        """The model is (or is no longer) loaded and warmed up."""


class NoObserver:
    def batch_scored(self, pairs: int, requests: int) -> None:
        pass

    def queue_waited(self, seconds: float) -> None:
        pass

    def stopped_early(self, stop_reason: str) -> None:
        pass

    def model_ready(self, ready: bool) -> None:
        pass


@dataclass(frozen=True)
class SchedulerStats:
    """Model batches run, pairs they scored, how many held pairs of more than
    one call, the most calls in one batch; calls waiting right now."""

    batches: int = 0
    pairs: int = 0
    shared_batches: int = 0
    most_requests: int = 0
    waiting: int = 0


class BatchScheduler:
    """Scores the pairs of concurrent calls in shared batches (see the module)."""

    def __init__(
        self,
        run_batch: RunBatch,
        planner: BatchPlanner,
        model_lock: threading.Lock,
        *,
        max_requests: int = 64,
        observer: ScoringObserver | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        """`model_lock` is held around each batch (warm-up takes it too);
        `max_requests`: calls whose pairs may share batches at once, the
        rest wait in arrival order (still answered by their deadline)."""
        if max_requests < 1:
            raise ValueError(f"max_requests must be at least 1, got {max_requests}")
        self._run_batch, self.planner, self._model_lock = run_batch, planner, model_lock
        self.max_requests = max_requests
        self._observer: ScoringObserver = observer or NoObserver()
        self._clock = clock
        self._changed = threading.Condition()
        self._jobs: list[ScoringJob] = []  # open calls, in arrival order
        self._arrivals = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._stats = SchedulerStats()

    def submit(
        self, query: str, passages: Sequence[str], deadline: float | None = None
    ) -> ScoringJob:
        """Queue a call's pairs; its result comes through `wait`/`wait_async`."""
        now = self._clock()
        tokens = [self.planner.pair_tokens(query, passage) for passage in passages]
        job = ScoringJob(query, list(passages), tokens, deadline, now, next(self._arrivals))
        with self._changed:
            if self._closed:
                raise Unavailable("the reranker is stopping")
            if not passages:
                job.finish("", now)
            elif not fits_alone(job, self.planner, now):
                # Out of time on arrival: not a queueing problem, the model is not asked.
                self._observer.stopped_early(job.finish(STOP_DEADLINE, now).stop_reason)
                self.planner.cost.relax()  # unless the cost is what is wrong
            else:
                self._jobs.append(job)
                self._start_thread()
                self._changed.notify_all()
        return job

    def wait(self, job: ScoringJob) -> ScoreResult:
        """The call's result, by its deadline at the latest (blocking)."""
        try:
            return job.future.result(timeout=self._time_left(job))
        except TimeoutError:
            return self.give_up(job)

    async def wait_async(self, job: ScoringJob) -> ScoreResult:
        """The call's result, by its deadline at the latest (no thread held)."""
        # Shielded: a timeout or cancellation here must not cancel the future
        # the model thread will still resolve (its error, if any, is read by
        # `give_up` or no one: marked retrieved so asyncio does not warn).
        resolved = asyncio.wrap_future(job.future)
        resolved.add_done_callback(lambda done: done.cancelled() or done.exception())
        result = asyncio.shield(resolved)
        try:
            async with asyncio.timeout(self._time_left(job)):
                return await result
        except TimeoutError:
            return self.give_up(job)
        except asyncio.CancelledError:
            self._abandon(job)  # the caller went away: score no more of its pairs
            raise

    def give_up(self, job: ScoringJob) -> ScoreResult:
        """Answer the call now with what is scored (its deadline has come)."""
        self._abandon(job)
        return job.future.result(timeout=0)

    def stats(self) -> SchedulerStats:
        with self._changed:
            return replace(self._stats, waiting=len(self._jobs))

    def close(self) -> None:
        """Refuse new calls; calls still waiting fail as unavailable."""
        with self._changed:
            self._closed = True
            for job in self._jobs:
                job.fail(Unavailable("the reranker is stopping"))
            self._jobs.clear()
            self._changed.notify_all()

    def _abandon(self, job: ScoringJob) -> None:
        with self._changed:
            if not job.finished:
                self._close(job, job.stop_reason_at_deadline(), self._clock())

    def _time_left(self, job: ScoringJob) -> float | None:
        return None if job.deadline is None else max(job.deadline - self._clock(), 0.0)

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="rerank-model", daemon=True)
            self._thread.start()

    def _serve(self) -> None:
        """The model thread: the next batch of whoever waits, until closed."""
        while self._await_work():
            with self._model_lock:
                batch = self._take_batch()
                if batch.entries:
                    self._run(batch)

    def _await_work(self) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: self._closed or bool(self._jobs))
            return not self._closed

    def _take_batch(self) -> PlannedBatch:
        """With the model held: retire calls that cannot fit another pair,
        then plan the batch and mark its pairs as being scored."""
        with self._changed:
            now = self._clock()
            for job in [job for job in self._jobs if not fits_alone(job, self.planner, now)]:
                self._close(job, job.stop_reason_at_deadline(), now)
            batch = plan_batch(self._jobs[: self.max_requests], self.planner, now)
            for job, _ in batch.entries:
                job.in_batch += 1
            for job in batch.jobs:
                if not job.batches:
                    self._observer.queue_waited(now - job.arrived)
                job.batches += 1
            return batch

    def _run(self, batch: PlannedBatch) -> None:
        started = self._clock()
        try:
            scores = self._run_batch(batch.pairs, batch.latest_deadline())
            if len(scores) != len(batch.entries):
                raise RuntimeError(f"{len(scores)} scores for {len(batch.entries)} pairs")
        except BatchInterrupted:  # past every deadline in it: nothing to deliver
            # Still a measurement, a lower bound: without it a cost on trial
            # would stay on trial and try every call's first pair in vain.
            self.planner.observe(batch.pair_tokens, (self._clock() - started) * 1000)
            self._deliver(batch, [])
            return
        except Exception as exc:  # the calls in this batch fail; the thread serves on
            log.exception("rerank_batch_failed", pairs=len(batch.entries))
            self._fail(batch, exc)
            return
        self.planner.observe(batch.pair_tokens, (self._clock() - started) * 1000)
        self._observer.batch_scored(len(batch.entries), len(batch.jobs))
        self._deliver(batch, scores)

    def _deliver(self, batch: PlannedBatch, scores: list[float]) -> None:
        """Each call's scores (a batch's pairs of one call are its next ones, in
        order); calls now complete are answered."""
        with self._changed:
            for (job, _), score in itertools.zip_longest(batch.entries, scores):
                job.in_batch -= 1
                if score is not None and not job.finished:
                    job.scores.append(score)
            now = self._clock()
            for job in batch.jobs:
                if not job.finished and len(job.scores) == len(job.passages):
                    self._close(job, "", now)
            if scores:
                self._count(batch)

    def _fail(self, batch: PlannedBatch, error: BaseException) -> None:
        with self._changed:
            for job in batch.jobs:
                job.in_batch = 0
                if job in self._jobs:
                    self._jobs.remove(job)
                job.fail(error)

    def _close(self, job: ScoringJob, stop_reason: str, now: float) -> None:
        """Answer a call (under the lock) and say why it stopped early, if it did."""
        if job in self._jobs:
            self._jobs.remove(job)
        result = job.finish(stop_reason, now)
        if result.partial:
            self._observer.stopped_early(result.stop_reason)
            if not job.batches:  # it waited for the model and never got it
                self._observer.queue_waited(now - job.arrived)

    def _count(self, batch: PlannedBatch) -> None:
        requests = len(batch.jobs)
        s = self._stats
        self._stats = SchedulerStats(
            batches=s.batches + 1,
            pairs=s.pairs + len(batch.entries),
            shared_batches=s.shared_batches + (requests > 1),
            most_requests=max(s.most_requests, requests),
        )
