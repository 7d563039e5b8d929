"""Fixtures of the stack tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A folder for the model's ONNX export, built by the first crash loop's
    first start (never killed) and reused by every restart, and by the other
    mode's loop when the same test worker runs it."""
    return {"RAG_EMBEDDING_CACHE_DIR": str(tmp_path_factory.mktemp("models"))}
