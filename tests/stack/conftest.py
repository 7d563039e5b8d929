"""Fixtures of the stack tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_cache(model_cache_dir: Path) -> dict[str, str]:
    """The session's model builds (tests/conftest.py), named explicitly for the
    crash loops' stacks: every restart reuses the export."""
    return {"RAG_EMBEDDING_CACHE_DIR": str(model_cache_dir)}
