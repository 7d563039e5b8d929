"""Fixtures of the embedding tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exported ONNX graphs, shared by the module's embedders."""
    return tmp_path_factory.mktemp("onnx-cache")
