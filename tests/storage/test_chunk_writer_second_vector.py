"""ChunkWriter.embed with a second model: the two models encode a batch side
by side, the rows keep the first model's columns then the second's, the
second model's thread keeps the run's priority, and an error in either
leaves no encoding running behind the writer. The encoders here are FAKES
(labelled): they record threads and timing, which the real models cannot."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from services.core.models import Chunk
from services.core.thread_priority import lower_this_thread, per_thread_nice, thread_nice
from services.storage.storage import ChunkWriter

pytestmark = pytest.mark.unit


class FakeEncoder:
    """FAKE document encoder: `dim` columns of `value`, after meeting the
    other encoder at `barrier` (both must be running at once to pass)."""

    def __init__(self, dim: int, value: float, barrier: threading.Barrier | None = None) -> None:
        self.dim, self.value, self.barrier = dim, value, barrier
        self.nice: int | None = None
        self.finished = threading.Event()
        self.error: Exception | None = None

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        self.nice = thread_nice(threading.get_native_id()) if per_thread_nice() else None
        try:
            if self.barrier is not None:
                self.barrier.wait()
            if self.error is not None:
                raise self.error
            return np.full((len(texts), self.dim), self.value, dtype=np.float32)
        finally:
            self.finished.set()


class SecondVectorStore:
    """FAKE vector store: only what ChunkWriter reads at construction."""

    second_dim = 2

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"embed must not touch the store ({name})")


def _chunks(n: int) -> list[Chunk]:
    return [
        Chunk(chunk_id=f"c{i}", doc_id="d", position=i, text=f"text {i}", content_hash=f"h{i}")
        for i in range(n)
    ]


def test_both_models_encode_at_once_and_rows_keep_their_columns() -> None:
    barrier = threading.Barrier(2, timeout=10)  # broken if the two ran one after the other
    first, second = FakeEncoder(3, 1.0, barrier), FakeEncoder(2, 2.0, barrier)
    writer = ChunkWriter(first, SecondVectorStore(), None, second_encoder=second)  # type: ignore[arg-type]
    rows = writer.embed(_chunks(4))
    assert rows.shape == (4, 5)
    assert (rows[:, :3] == 1.0).all() and (rows[:, 3:] == 2.0).all()


@pytest.mark.skipif(not per_thread_nice(), reason="per-thread nice values are Linux's")
def test_the_second_model_runs_at_the_run_thread_s_priority() -> None:
    first, second = FakeEncoder(3, 1.0), FakeEncoder(2, 2.0)
    writer = ChunkWriter(first, SecondVectorStore(), None, second_encoder=second)  # type: ignore[arg-type]

    def lowered_run() -> None:
        lower_this_thread(6)
        writer.embed(_chunks(2))

    run = threading.Thread(target=lowered_run)
    run.start()
    run.join()
    assert first.nice == second.nice and second.nice is not None and second.nice >= 6


@pytest.mark.parametrize("failing", ["first", "second"])
def test_an_error_in_either_model_is_raised_after_both_stopped(failing: str) -> None:
    first, second = FakeEncoder(3, 1.0), FakeEncoder(2, 2.0)
    (first if failing == "first" else second).error = RuntimeError(f"{failing} failed")
    writer = ChunkWriter(first, SecondVectorStore(), None, second_encoder=second)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=f"{failing} failed"):
        writer.embed(_chunks(2))
    assert first.finished.is_set() and second.finished.is_set()
