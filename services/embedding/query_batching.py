"""Micro-batching of concurrent query embeddings (leader/follower).

One forward pass over 16 short queries costs about as much as two or three
passes over one (measured, MiniLM-L6 on 2 cores: 95 queries/s one at a time,
217 queries/s in batches of 16), so queries that arrive while the model is
busy wait and then share one pass:

- a caller that finds the model idle runs at once, alone: no timer, no added
  latency when queries do not overlap;
- callers that arrive while a pass runs queue up; when the model frees up,
  one of them becomes the leader and runs every waiting query (oldest first,
  up to `max_batch`) in one pass, then hands each caller its vector;
- an error in a pass reaches every caller whose query was in it.

The leader keeps leading until its own query is done, then hands over, so a
queue longer than `max_batch` is served in arrival order.

A caller may give a deadline (time.monotonic()). Queries still queued when
it passes are withdrawn and never encoded, and the caller gets
DeadlineExceeded at once instead of blocking its thread until a pass it no
longer needs: a caller whose channel has given up must not hold a worker
thread, nor spend the model on an answer nobody reads (a few long questions
abandoned by their callers once held every worker of the Retriever for
seconds, issue "Hold under faults", probe 3). A query already in a running
pass is waited for: one pass is bounded.

Document passes (an ingest, in the embedded stack where one model serves
both) go through `run_document_pass`, one at a time, in one of two ways:

- alongside queries (`documents_alongside`, ONNX Runtime, whose sessions run
  concurrent calls safely): a query pass never waits for a document pass,
  the two share the cores. Measured with multilingual-e5-small on 2 cores,
  one ~1000-character passage per pass back to back: a query took 35 ms at
  the median and 72 ms at p99 alongside, against 113 ms and ~290 ms when it
  had to wait for the pass in progress, for the same document throughput
  (6.8 passes/s);
- between queries (torch, whose modules are not safe for concurrent passes
  on every build): a pass runs only while no query leads, runs or waits, so
  a query waits behind at most one document pass, never a whole ingest batch
  (measured: one Upsert's 256 chunks held the model ~6 s, and queries behind
  it timed out). So that a steady stream of queries slows indexing without
  stopping it, a waiting document pass goes next once `max_passes_ahead`
  query passes have run while it waited.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np

from services.core.errors import DeadlineExceeded

EncodeFn = Callable[[list[str]], np.ndarray]
T = TypeVar("T")
# Query passes that may overtake one waiting document pass. Queries are short
# (~4 ms) and a document pass is bounded (EmbedderConfig.document_pass_chars),
# so under a query flood indexing still gets about one pass in five.
DEFAULT_PASSES_AHEAD = 4


class QueryEmbeddingObserver(Protocol):
    """Told of each query forward pass and cache look-up (e.g. the Retriever's
    metrics). Called from the embedding threads: it must be quick, and must not raise."""

    def observe_query_batch(self, size: int) -> None: ...

    def observe_query_cache(self, hit: bool) -> None: ...


@dataclass(frozen=True)
class QueryBatchStats:
    """What the model did for queries: how many queries reached it, in how
    many forward passes, and how many distinct texts each pass encoded; and
    how many queries and document passes wait for the model right now."""

    queries: int = 0
    forward_passes: int = 0
    largest_batch: int = 0
    batch_sizes: dict[int, int] = field(default_factory=dict)
    waiting: int = 0
    document_passes: int = 0
    documents_waiting: int = 0

    @property
    def mean_batch(self) -> float:
        return self.queries / self.forward_passes if self.forward_passes else 0.0


class _PendingQuery:
    __slots__ = ("deadline", "done", "error", "text", "vector")

    def __init__(self, text: str, deadline: float | None = None) -> None:
        self.text = text
        self.deadline = deadline  # time.monotonic(); None: none
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False

    def expired(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    def withdraw(self) -> None:
        self.error = DeadlineExceeded("query embedding withdrawn: its caller's deadline passed")
        self.done = True

    def outcome(self) -> np.ndarray:
        if self.error is not None:
            raise self.error
        assert self.vector is not None
        return self.vector


class QueryBatcher:
    """Runs `encode` over batches of concurrently waiting queries.

    `model_lock` is held around each query pass, and around each document
    pass unless `documents_alongside` (module docstring). The batch is taken
    only once the lock is held, so queries that arrive while another pass
    runs join the next one."""

    def __init__(
        self,
        encode: EncodeFn,
        max_batch: int,
        model_lock: AbstractContextManager[object],
        max_passes_ahead: int = DEFAULT_PASSES_AHEAD,
        documents_alongside: bool = False,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if max_passes_ahead < 1:
            raise ValueError(f"max_passes_ahead must be at least 1, got {max_passes_ahead}")
        self._encode = encode
        self.max_batch = max_batch
        self.max_passes_ahead = max_passes_ahead
        self._model_lock = model_lock
        self.documents_alongside = documents_alongside
        self._documents_lock = threading.Lock()  # one document pass at a time, alongside
        self._changed = threading.Condition()
        self._waiting: deque[_PendingQuery] = deque()
        self._leading = False
        self._passes = 0
        self._queries = 0
        self._sizes: Counter[int] = Counter()
        self._documents_running = False
        self._documents_waiting = 0
        self._passes_ahead = 0  # query passes run while a document pass waited
        self._document_passes = 0
        self.observer: QueryEmbeddingObserver | None = None  # told each pass's size

    def embed(self, text: str, deadline: float | None = None) -> np.ndarray:
        return self.embed_many([text], deadline)[0]

    def embed_many(self, texts: list[str], deadline: float | None = None) -> list[np.ndarray]:
        """Several queries of one caller (a question and its translations),
        queued together so that they share a pass when they fit in one;
        DeadlineExceeded when `deadline` (time.monotonic()) passes while they
        are still queued."""
        queries = [_PendingQuery(text, deadline) for text in texts]
        last = queries[-1]  # served oldest first: the last done means all done
        with self._changed:
            self._waiting.extend(queries)
            patience = deadline  # None once there is nothing left to withdraw
            while self._model_taken_for_queries() and not last.done:
                if patience is None:
                    self._changed.wait()
                elif not self._changed.wait(max(patience - time.monotonic(), 0.0)):
                    # Withdraw what is still queued (then the loop ends); what a pass
                    # has taken is waited for without a timeout: one pass is bounded,
                    # and a zero timeout would spin until it ends.
                    self._withdraw_queued(queries)
                    patience = None
            leader = not last.done
            if leader:
                self._leading = True
        if leader:
            self._lead_until_done(last)
        return [query.outcome() for query in queries]

    def stats(self) -> QueryBatchStats:
        with self._changed:
            return QueryBatchStats(
                queries=self._queries,
                forward_passes=self._passes,
                largest_batch=max(self._sizes, default=0),
                batch_sizes=dict(sorted(self._sizes.items())),
                waiting=len(self._waiting),
                document_passes=self._document_passes,
                documents_waiting=self._documents_waiting,
            )

    def run_document_pass(self, encode: Callable[[], T]) -> T:
        """Run one document pass: alongside query passes, or between them."""
        if not self.documents_alongside:
            return self._run_between_queries(encode)
        with self._documents_lock:
            try:
                return encode()
            finally:
                with self._changed:
                    self._document_passes += 1

    def _run_between_queries(self, encode: Callable[[], T]) -> T:
        """Run one document pass when no query leads, runs or waits (or when
        `max_passes_ahead` query passes went first), holding the model lock."""
        with self._changed:
            self._documents_waiting += 1
            try:
                while self._model_taken_for_documents():
                    self._changed.wait()
            finally:
                self._documents_waiting -= 1
                self._changed.notify_all()  # queries held back for this pass re-check
            self._documents_running = True
            self._passes_ahead = 0
        try:
            with self._model_lock:
                return encode()
        finally:
            with self._changed:
                self._documents_running = False
                self._document_passes += 1
                self._changed.notify_all()

    def _document_due(self) -> bool:
        # Caller holds self._changed.
        return self._documents_waiting > 0 and self._passes_ahead >= self.max_passes_ahead

    def _model_taken_for_queries(self) -> bool:
        return self._leading or self._documents_running or self._document_due()

    def _model_taken_for_documents(self) -> bool:
        queries_first = bool(self._waiting) and not self._document_due()
        return self._leading or self._documents_running or queries_first

    def _lead_until_done(self, own: _PendingQuery) -> None:
        try:
            while not own.done:  # only this thread completes queries now
                with self._model_lock:
                    batch = self._take_batch()
                    if batch:  # else every one was withdrawn, its own among them
                        self._run_pass(batch)
        finally:
            with self._changed:
                self._leading = False
                self._changed.notify_all()

    def _withdraw_queued(self, queries: list[_PendingQuery]) -> None:
        """Take back those of `queries` no pass has taken yet. Caller holds
        self._changed."""
        queued = [query for query in queries if query in self._waiting]
        for query in queued:
            self._waiting.remove(query)
            query.withdraw()
        if queued:
            self._changed.notify_all()

    def _take_batch(self) -> list[_PendingQuery]:
        """The oldest waiting queries, up to `max_batch`; those whose caller's
        deadline has passed are withdrawn on the way (never encoded)."""
        with self._changed:
            now = time.monotonic()
            batch: list[_PendingQuery] = []
            withdrawn = False
            while self._waiting and len(batch) < self.max_batch:
                query = self._waiting.popleft()
                if query.expired(now):
                    query.withdraw()
                    withdrawn = True
                else:
                    batch.append(query)
            if withdrawn:
                self._changed.notify_all()  # their callers wake and leave
            return batch

    def _run_pass(self, batch: list[_PendingQuery]) -> None:
        texts = list(dict.fromkeys(query.text for query in batch))  # a repeated query runs once
        rows = {text: row for row, text in enumerate(texts)}
        vectors: list[np.ndarray] = []
        error: BaseException | None = None
        try:
            encoded = self._encode(texts)
            vectors = [encoded[rows[query.text]].copy() for query in batch]
        except BaseException as exc:  # every waiter must hear of it, whatever it is
            error = exc
        with self._changed:
            for position, query in enumerate(batch):
                query.vector = vectors[position] if error is None else None
                query.error = error
                query.done = True
            self._passes += 1
            if self._documents_waiting:
                self._passes_ahead += 1
            self._queries += len(batch)
            self._sizes[len(texts)] += 1
            self._changed.notify_all()
        if self.observer is not None:  # outside the condition: waiters go on first
            self.observer.observe_query_batch(len(batch))
