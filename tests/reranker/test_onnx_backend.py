"""The ONNX Runtime path ranks like the torch path on the same model, and its
exports are cached by weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from transformers import AutoModelForSequenceClassification

from services.embedding.onnx_export import weights_fingerprint
from services.reranker.scorer import CrossEncoderScorer
from tests.reranker.texts import QUERY, passages
from tests.support.cpu_features import INT8_TOLERANCE_NEEDS_VNNI
from tests.support.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.integration


def loaded(model_dir: Path, cache: Path, backend: str) -> CrossEncoderScorer:
    scorer = CrossEncoderScorer(str(model_dir), backend=backend, cache_dir=cache)  # type: ignore[arg-type]
    scorer.load()
    return scorer


def ranks(scores: list[float]) -> np.ndarray:
    return np.argsort(np.argsort(-np.asarray(scores)))


@pytest.fixture(scope="module")
def onnx_scorer(tiny_model_dir: Path, onnx_cache: Path) -> CrossEncoderScorer:
    return loaded(tiny_model_dir, onnx_cache, "onnx")


def test_onnx_ranks_like_torch(
    tiny_scorer: CrossEncoderScorer, onnx_scorer: CrossEncoderScorer
) -> None:
    texts = passages(20, chars=500)
    torch_scores = tiny_scorer.score(QUERY, texts).scores
    onnx_scores = onnx_scorer.score(QUERY, texts).scores
    assert list(np.argsort(onnx_scores)) == list(np.argsort(torch_scores))
    np.testing.assert_allclose(onnx_scores, torch_scores, atol=1e-4)


@INT8_TOLERANCE_NEEDS_VNNI
def test_int8_keeps_the_ranking_close(
    tiny_scorer: CrossEncoderScorer,
    tiny_model_dir: Path,
    onnx_cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # quantization must leave no side files in the cwd
    int8 = loaded(tiny_model_dir, onnx_cache, "onnx-int8")
    assert list(tmp_path.iterdir()) == []
    texts = passages(20, chars=500)
    torch_ranks = ranks(tiny_scorer.score(QUERY, texts).scores)
    int8_ranks = ranks(int8.score(QUERY, texts).scores)
    assert np.corrcoef(torch_ranks, int8_ranks)[0, 1] > 0.9  # Spearman's rho


def test_export_is_reused_from_the_cache(
    onnx_scorer: CrossEncoderScorer, tiny_model_dir: Path, onnx_cache: Path
) -> None:
    exported = sorted(onnx_cache.rglob("model.onnx"))
    stamps = [path.stat().st_mtime_ns for path in exported]
    again = loaded(tiny_model_dir, onnx_cache, "onnx")
    assert sorted(onnx_cache.rglob("model.onnx")) == exported
    assert [path.stat().st_mtime_ns for path in exported] == stamps
    np.testing.assert_allclose(
        again.score(QUERY, ["a passage"]).scores, onnx_scorer.score(QUERY, ["a passage"]).scores
    )


def test_fingerprint_follows_the_weights(tmp_path: Path) -> None:
    """Same seed, same weights (the builder is deterministic); another seed,
    another cache entry."""
    paths = [
        build_tiny_cross_encoder(tmp_path / "a", seed=1),
        build_tiny_cross_encoder(tmp_path / "b", seed=1),
        build_tiny_cross_encoder(tmp_path / "c", seed=2),
    ]
    first, again, other = (
        weights_fingerprint(AutoModelForSequenceClassification.from_pretrained(path))
        for path in paths
    )
    assert first == again != other
