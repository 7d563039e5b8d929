"""Fixtures of the operator CLI's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.embedding.embedder import Embedder
from tests.support.stack import BackgroundStack


@pytest.fixture
def stack(tmp_path: Path, embedder: Embedder) -> Iterator[BackgroundStack]:
    """An empty stack of the test's own, with no Reranker configured."""
    stack = BackgroundStack(tmp_path / "data", embedder).start()
    yield stack
    stack.stop()
