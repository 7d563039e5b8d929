"""Concurrent calls share forward passes of the real (tiny, self-built)
cross-encoder, and each call's scores are the ones it gets alone: a pair's
score does not depend on its batch neighbours or on the padding they bring
(float noise aside), with either backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from services.reranker.batching import NoObserver
from services.reranker.jobs import ScoreResult
from services.reranker.scorer import CrossEncoderScorer
from tests.reranker.texts import QUERY, passages

pytestmark = pytest.mark.integration

GENEROUS_S = 60.0  # only ever waited out when a test is broken
BATCH_SIZE = 8
# Four calls of different sizes and passage lengths (40 to ~330 tokens), so
# that a shared batch pads most pairs far beyond their own length.
CALLS = {
    f"{QUERY} {i}": passages(2 + i, chars=chars, seed=i)
    for i, chars in enumerate((150, 600, 1300, 300))
}


class BatchRecorder(NoObserver):
    """Records (pairs, calls) of every model batch (test-only observer)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int]] = []

    def batch_scored(self, pairs: int, requests: int) -> None:
        self.batches.append((pairs, requests))


@pytest.fixture(scope="module", params=["torch", "onnx"])
def recorded(
    request: pytest.FixtureRequest, tiny_model_dir: Path, onnx_cache: Path
) -> tuple[CrossEncoderScorer, BatchRecorder]:
    recorder = BatchRecorder()
    scorer = CrossEncoderScorer(
        str(tiny_model_dir),
        backend=request.param,
        max_length=512,
        batch_size=BATCH_SIZE,
        cache_dir=onnx_cache,
        observer=recorder,
    )
    scorer.load()
    scorer.warm_up()
    return scorer, recorder


def wait_until(condition: Callable[[], bool]) -> None:
    give_up = time.monotonic() + GENEROUS_S
    while not condition():
        assert time.monotonic() < give_up, "condition never held"
        time.sleep(0.001)


def score_concurrently(scorer: CrossEncoderScorer) -> dict[str, ScoreResult]:
    """Every call submitted while the model is held (as by a running batch),
    so that they all wait for its next forward pass."""
    results: dict[str, ScoreResult] = {}

    def call(query: str) -> None:
        results[query] = scorer.score(query, CALLS[query])

    threads = [threading.Thread(target=call, args=(query,)) for query in CALLS]
    with scorer._model_lock:
        for thread in threads:
            thread.start()
        wait_until(lambda: scorer.scheduling().waiting == len(CALLS))
    for thread in threads:
        thread.join(timeout=GENEROUS_S)
    return results


def test_concurrent_calls_share_forward_passes_and_score_as_alone(
    recorded: tuple[CrossEncoderScorer, BatchRecorder],
) -> None:
    scorer, recorder = recorded
    alone = {query: scorer.score(query, texts) for query, texts in CALLS.items()}
    recorder.batches.clear()
    before = scorer.scheduling()
    together = score_concurrently(scorer)
    after = scorer.scheduling()
    pairs = sum(len(texts) for texts in CALLS.values())  # 14
    # The first pass held the first two pairs of all four calls, the second the
    # rest of the three longer ones: two passes (alone, one per call: four).
    assert recorder.batches == [(BATCH_SIZE, len(CALLS)), (pairs - BATCH_SIZE, 3)]
    assert after.shared_batches - before.shared_batches == 2
    assert after.most_requests == len(CALLS)
    for query, result in together.items():
        assert (result.scored, result.partial) == (len(CALLS[query]), False)
        np.testing.assert_allclose(result.scores, alone[query].scores, rtol=1e-5, atol=1e-5)
    distinct = {round(score, 3) for result in alone.values() for score in result.scores}
    assert len(distinct) > pairs // 2  # the scores do differ: the comparison means something
