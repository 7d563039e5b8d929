"""Queries before document passes on one model (QueryBatcher.run_document_pass, between queries),
on real threads with a fake model that records the order of its passes: a
waiting query overtakes a waiting document pass, a document pass waits behind
at most `max_passes_ahead` query passes, and `document_passes` cuts a batch
into bounded passes. Every wait is for an event, never for a duration."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

from services.embedding.embedder import document_passes
from services.embedding.query_batching import QueryBatcher
from tests.embedding.support import wait_until

pytestmark = pytest.mark.unit

TIMEOUT_S = 30


class RecordingModel:
    """Records each pass ("q:<texts>" or "doc:<name>"); the first query pass
    blocks until released, so the test can queue work behind a busy model."""

    def __init__(self) -> None:
        self.passes: list[str] = []
        self.first_pass_started = threading.Event()
        self.release_first_pass = threading.Event()
        self.on_query_pass: Callable[[int], None] = lambda _: None

    def encode(self, texts: list[str]) -> np.ndarray:
        self.passes.append("q:" + ",".join(texts))
        if len(self.passes) == 1:
            self.first_pass_started.set()
            assert self.release_first_pass.wait(TIMEOUT_S)
        self.on_query_pass(len(self.passes))
        return np.ones((len(texts), 2), dtype=np.float32)

    def document(self, name: str) -> Callable[[], str]:
        def run() -> str:
            self.passes.append(f"doc:{name}")
            return name

        return run


def start(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def busy_model(max_passes_ahead: int = 4) -> tuple[RecordingModel, QueryBatcher, threading.Thread]:
    """A batcher whose model is inside a first query pass ("q:first") that
    blocks until the test releases it."""
    model = RecordingModel()
    batcher = QueryBatcher(model.encode, 32, threading.Lock(), max_passes_ahead)
    first = start(lambda: batcher.embed("first"))
    assert model.first_pass_started.wait(TIMEOUT_S)
    return model, batcher, first


@pytest.mark.parametrize("round_", range(10))  # the wake-up order of threads varies
def test_a_waiting_query_goes_before_a_document_pass_that_waited_longer(round_: int) -> None:
    model, batcher, first = busy_model()
    documents = [start(lambda: batcher.run_document_pass(model.document("d1")))]
    wait_until(lambda: batcher.stats().documents_waiting == 1, TIMEOUT_S)
    query = start(lambda: batcher.embed("late query"))
    wait_until(lambda: batcher.stats().waiting == 1, TIMEOUT_S)
    documents.append(start(lambda: batcher.run_document_pass(model.document("d2"))))
    wait_until(lambda: batcher.stats().documents_waiting == 2, TIMEOUT_S)
    model.release_first_pass.set()
    for thread in (first, query, *documents):
        thread.join(TIMEOUT_S)
    assert model.passes[:2] == ["q:first", "q:late query"]
    assert sorted(model.passes[2:]) == ["doc:d1", "doc:d2"]
    assert batcher.stats().document_passes == 2


def test_document_passes_run_in_turn_when_no_query_waits() -> None:
    model = RecordingModel()
    model.release_first_pass.set()
    batcher = QueryBatcher(model.encode, 32, threading.Lock())
    names = [batcher.run_document_pass(model.document(f"d{n}")) for n in range(3)]
    assert names == ["d0", "d1", "d2"]
    assert batcher.embed("after").shape == (2,)
    assert model.passes == ["doc:d0", "doc:d1", "doc:d2", "q:after"]


def test_a_stream_of_queries_lets_a_document_pass_in_after_max_passes_ahead() -> None:
    """Every query pass queues the next query before it ends, so a query
    always waits; the document pass still goes after two query passes."""
    model, batcher, first = busy_model(max_passes_ahead=2)
    threads: list[threading.Thread] = []
    names = iter(f"q{n}" for n in range(1, 6))

    def queue_next_query(_: int) -> None:
        if (name := next(names, None)) is not None:
            threads.append(start(lambda: batcher.embed(name)))
            wait_until(lambda: batcher.stats().waiting >= 1, TIMEOUT_S)

    model.on_query_pass = queue_next_query
    document = start(lambda: batcher.run_document_pass(model.document("d1")))
    wait_until(lambda: batcher.stats().documents_waiting == 1, TIMEOUT_S)
    model.release_first_pass.set()
    document.join(TIMEOUT_S)
    first.join(TIMEOUT_S)
    wait_until(lambda: len(threads) == 5, TIMEOUT_S)
    for thread in threads:
        thread.join(TIMEOUT_S)
    # "first" and "q1" ran while the document waited; then the document.
    assert model.passes[:3] == ["q:first", "q:q1", "doc:d1"]
    assert len(model.passes) == 7 and model.passes[3:] == ["q:q2", "q:q3", "q:q4", "q:q5"]


def test_an_error_in_a_document_pass_frees_the_model() -> None:
    model = RecordingModel()
    model.release_first_pass.set()
    batcher = QueryBatcher(model.encode, 32, threading.Lock())

    def failing() -> None:
        raise ValueError("bad document")

    with pytest.raises(ValueError, match="bad document"):
        batcher.run_document_pass(failing)
    assert batcher.embed("next").shape == (2,)
    assert model.passes == ["q:next"]


def test_max_passes_ahead_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_passes_ahead"):
        QueryBatcher(RecordingModel().encode, 32, threading.Lock(), max_passes_ahead=0)


def test_document_passes_are_longest_first_within_the_budget() -> None:
    lengths = [300, 900, 100, 2500, 600, 400]
    passes = document_passes(lengths, 1000)
    assert passes == [[3], [1], [4, 5], [0, 2]]
    assert sorted(row for p in passes for row in p) == list(range(len(lengths)))
    for rows in passes:
        assert len(rows) == 1 or sum(lengths[r] for r in rows) <= 1000


def test_document_passes_of_nothing_is_no_pass() -> None:
    assert document_passes([], 1000) == []


# -- alongside queries (ONNX Runtime) ---------------------------------------


def test_alongside_a_document_pass_runs_while_a_query_pass_runs() -> None:
    model = RecordingModel()
    batcher = QueryBatcher(model.encode, 32, threading.Lock(), documents_alongside=True)
    first = start(lambda: batcher.embed("first"))
    assert model.first_pass_started.wait(TIMEOUT_S)  # the query pass holds the model
    assert batcher.run_document_pass(model.document("d1")) == "d1"  # not behind it
    model.release_first_pass.set()
    first.join(TIMEOUT_S)
    assert model.passes == ["q:first", "doc:d1"]
    assert batcher.stats().document_passes == 1


def test_alongside_document_passes_still_run_one_at_a_time() -> None:
    batcher = QueryBatcher(RecordingModel().encode, 32, threading.Lock(), documents_alongside=True)
    release, second_started = threading.Event(), threading.Event()
    events: list[str] = []

    def blocking() -> str:
        events.append("d1 start")
        assert release.wait(TIMEOUT_S)
        events.append("d1 end")
        return "d1"

    def second() -> str:
        events.append("d2 start")
        second_started.set()
        return "d2"

    one = start(lambda: batcher.run_document_pass(blocking))
    wait_until(lambda: events == ["d1 start"], TIMEOUT_S)
    two = start(lambda: batcher.run_document_pass(second))
    # Without the one-at-a-time rule d2 starts at once; with it, never while
    # d1 runs (this wait only gives a broken rule the chance to show).
    assert not second_started.wait(0.3)
    release.set()
    for thread in (one, two):
        thread.join(TIMEOUT_S)
    assert events == ["d1 start", "d1 end", "d2 start"]
    assert batcher.stats().document_passes == 2


def test_alongside_an_error_in_a_document_pass_reaches_its_caller_only() -> None:
    model = RecordingModel()
    model.release_first_pass.set()
    batcher = QueryBatcher(model.encode, 32, threading.Lock(), documents_alongside=True)

    def failing() -> None:
        raise ValueError("bad document")

    with pytest.raises(ValueError, match="bad document"):
        batcher.run_document_pass(failing)
    assert batcher.run_document_pass(model.document("d2")) == "d2"
    assert batcher.embed("next").shape == (2,)
