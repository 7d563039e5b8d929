"""CrossEncoderScorer on real (tiny, self-built) cross-encoders: loading,
input order, activation, deadlines, limits and shared use across threads."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import CrossEncoder

from services.core.errors import InvalidArgument, Unavailable
from services.reranker.backends import ScoringBackend
from services.reranker.scorer import CrossEncoderScorer, InputLimits, ModelLoadError
from tests.reranker.texts import QUERY, passages

pytestmark = pytest.mark.integration

SCHEDULING_TOLERANCE_S = 0.05


def test_loads_by_path_and_reports_loaded(tiny_scorer: CrossEncoderScorer) -> None:
    assert tiny_scorer.loaded
    assert tiny_scorer.reason == ""
    assert tiny_scorer.planner.cost.calibrated  # warm-up measured the batch cost


def test_scores_are_in_input_order(tiny_scorer: CrossEncoderScorer) -> None:
    texts = passages(12, chars=300)
    forward = tiny_scorer.score(QUERY, texts)
    backward = tiny_scorer.score(QUERY, texts[::-1])
    one_by_one = [tiny_scorer.score(QUERY, [text]).scores[0] for text in texts]
    assert (forward.scored, forward.partial, forward.stop_reason) == (12, False, "")
    np.testing.assert_allclose(forward.scores, one_by_one, atol=1e-4)
    np.testing.assert_allclose(forward.scores, backward.scores[::-1], atol=1e-4)
    assert len({round(score, 3) for score in forward.scores}) > 6  # the scores do differ


def test_sigmoid_activation_maps_logits(
    tiny_model_dir: Path, tiny_scorer: CrossEncoderScorer
) -> None:
    sigmoid = CrossEncoderScorer(str(tiny_model_dir), activation="sigmoid")
    sigmoid.load()
    texts = passages(5)
    logits = tiny_scorer.score(QUERY, texts).scores
    expected = [1 / (1 + math.exp(-value)) for value in logits]
    np.testing.assert_allclose(sigmoid.score(QUERY, texts).scores, expected, atol=1e-5)


def test_missing_path_is_not_loaded_with_the_reason(tmp_path: Path) -> None:
    scorer = CrossEncoderScorer(str(tmp_path / "no-such-model"))
    with pytest.raises(ModelLoadError, match="does not exist"):
        scorer.load()
    assert not scorer.loaded
    assert "does not exist" in scorer.reason
    with pytest.raises(Unavailable, match="not loaded: model path"):
        scorer.score(QUERY, ["passage"])


def test_hub_name_fails_fast_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    scorer = CrossEncoderScorer("rag-tests/no-such-cross-encoder")
    started = time.monotonic()
    with pytest.raises(ModelLoadError, match=r"HF_HUB_OFFLINE=1"):
        scorer.load()
    assert time.monotonic() - started < 30  # no network retries
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_max_length_beyond_the_model_positions_is_refused(tiny_model_dir: Path) -> None:
    scorer = CrossEncoderScorer(str(tiny_model_dir), max_length=1024)
    with pytest.raises(ModelLoadError, match="exceeds the 512 positions"):
        scorer.load()


def test_no_deadline_scores_everything(tiny_scorer: CrossEncoderScorer) -> None:
    result = tiny_scorer.score(QUERY, passages(30))
    assert (result.scored, result.partial) == (30, False)
    assert len(result.scores) == 30


def test_expired_deadline_scores_nothing(tiny_scorer: CrossEncoderScorer) -> None:
    result = tiny_scorer.score(QUERY, passages(5), deadline=time.monotonic() - 0.001)
    assert (result.scores, result.scored, result.partial) == ([], 0, True)
    assert result.stop_reason == "deadline"


SMALL_BATCH = 2


class BatchSpy:
    """Spy around a real backend: records when each batch starts and ends."""

    def __init__(self, backend: ScoringBackend) -> None:
        self.backend = backend
        self.name = backend.name
        self.batches: list[tuple[float, float]] = []

    def logits(self, pairs: Sequence[tuple[str, str]], deadline: float | None = None) -> np.ndarray:
        started = time.monotonic()
        try:
            return self.backend.logits(pairs, deadline)
        finally:
            self.batches.append((started, time.monotonic()))


class SpiedScorer(CrossEncoderScorer):
    spy: BatchSpy

    def _make_backend(self, cross_encoder: CrossEncoder) -> ScoringBackend:
        self.spy = BatchSpy(super()._make_backend(cross_encoder))
        return self.spy


@pytest.fixture(scope="module", params=["torch", "onnx"])
def small_scorer(
    request: pytest.FixtureRequest, small_model_dir: Path, onnx_cache: Path
) -> SpiedScorer:
    scorer = SpiedScorer(
        str(small_model_dir), backend=request.param, batch_size=SMALL_BATCH, cache_dir=onnx_cache
    )
    scorer.load()
    scorer.warm_up()
    return scorer


def predicted_batch_s(scorer: CrossEncoderScorer, texts: list[str]) -> float:
    planner = scorer.planner
    predicted = planner.cost.predict_ms(planner.tokens.padded_batch_tokens(QUERY, texts))
    assert predicted is not None  # calibrated by the warm-up
    return predicted / 1000


def test_short_deadline_returns_a_scored_prefix_in_time(small_scorer: SpiedScorer) -> None:
    """The budget is what the scorer itself predicts for a few batches, out of
    a hundred: it must score some and stop long before the end. The budget
    grows until a batch fits, so a busy machine cannot fail it; the contract
    is asserted on every result."""
    texts = passages(200, chars=800)
    batch_s = predicted_batch_s(small_scorer, texts[:SMALL_BATCH])
    for batches in (3, 6, 12, 24):
        deadline = time.monotonic() + batches * batch_s
        small_scorer.spy.batches.clear()
        result = small_scorer.score(QUERY, texts, deadline=deadline)
        finished = time.monotonic()
        assert result.partial and result.stop_reason == "deadline"
        assert result.scored < len(texts) and len(result.scores) == result.scored
        # No batch starts once the deadline has passed (it stops *before* one that would not fit).
        assert all(
            start <= deadline + SCHEDULING_TOLERANCE_S for start, _ in small_scorer.spy.batches
        )
        if small_scorer.backend != "torch":
            # ONNX Runtime also abandons a batch at the deadline. (A torch forward
            # pass cannot be interrupted: on a busy machine its last batch may end
            # late, the call being answered at its deadline without that batch.)
            assert finished <= deadline + SCHEDULING_TOLERANCE_S
        if result.scored > 0:
            break
    assert result.scored > 0, "no batch fitted even 24 predicted batches"
    prefix = small_scorer.score(QUERY, texts[: result.scored])
    np.testing.assert_allclose(result.scores, prefix.scores, atol=1e-3)


def test_concurrent_requests_share_the_model_safely(tiny_scorer: CrossEncoderScorer) -> None:
    queries = [f"{QUERY} {i}" for i in range(4)]
    texts = passages(12)
    expected = {q: tiny_scorer.score(q, texts).scores for q in queries}
    results: dict[str, list[float]] = {}

    def run(query: str) -> None:
        results[query] = tiny_scorer.score(query, texts).scores

    threads = [threading.Thread(target=run, args=(q,)) for q in queries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert set(results) == set(queries)
    for query in queries:
        np.testing.assert_allclose(results[query], expected[query], atol=1e-4)


class TestInputLimits:
    limits = InputLimits(max_passages=3, max_passage_chars=10)

    def test_query_and_passages_are_truncated_not_rejected(self) -> None:
        query, texts = self.limits.clean("  q" * 20, ["a" * 50, "short"])
        assert len(query) == 10 and query == query.strip()
        assert texts == ["a" * 10, "short"]

    @pytest.mark.parametrize(
        ("query", "texts", "message"),
        [
            ("", ["p"], "query: is empty"),
            ("  \n\t ", ["p"], "query: is empty"),
            ("\u200c\u2061\ufe0f\U0001d173\x00\u3000", ["p"], "query: is empty"),
            ("q", [], "passages: empty"),
            ("q", ["p"] * 4, "passages: 4 given; at most 3"),
            ("q", ["p", ""], r"passages\[1\]: shows nothing"),
            ("q", [" \n\u200b", "p"], r"passages\[0\]: shows nothing"),
        ],
    )
    def test_bad_requests_are_invalid(self, query: str, texts: list[str], message: str) -> None:
        with pytest.raises(InvalidArgument, match=message):
            self.limits.clean(query, texts)


def test_a_short_request_is_not_stuck_behind_a_long_one(small_scorer: SpiedScorer) -> None:
    """Batches of concurrent requests interleave: a 2-passage call that starts
    while a 100-passage call runs finishes long before it."""
    finished: dict[str, float] = {}

    def run(name: str, count: int) -> None:
        small_scorer.score(QUERY, passages(count, chars=800))
        finished[name] = time.monotonic()

    long = threading.Thread(target=run, args=("long", 100))
    small_scorer.spy.batches.clear()
    long.start()
    while not small_scorer.spy.batches:  # the long call has scored its first batch
        time.sleep(0.001)
    short = threading.Thread(target=run, args=("short", SMALL_BATCH))
    short.start()
    short.join(timeout=120)
    long.join(timeout=120)
    assert finished["short"] < finished["long"]
