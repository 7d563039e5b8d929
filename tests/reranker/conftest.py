"""Cross-encoders built on the fly (no pretrained one can be installed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.reranker.scorer import CrossEncoderScorer
from tests.support.tiny_cross_encoder import (
    SMALL,
    build_random_cross_encoder,
    build_tiny_cross_encoder,
)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Slower than the tiny one, so that batches take measurable time."""
    return build_random_cross_encoder(tmp_path_factory.mktemp("small-cross-encoder"), SMALL)


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="session")
def tiny_scorer(tiny_model_dir: Path, onnx_cache: Path) -> CrossEncoderScorer:
    scorer = CrossEncoderScorer(str(tiny_model_dir), cache_dir=onnx_cache)
    scorer.load()
    scorer.warm_up()
    return scorer
