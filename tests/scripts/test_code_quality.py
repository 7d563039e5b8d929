"""ruff and mypy stay clean: the same checks as `make lint` and `make typecheck`,
run by `make test` so a change cannot land with either failing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PATHS = ["services", "gateway", "rag_client", "tests", "scripts", "bench"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=ROOT, capture_output=True, text=True, timeout=840, check=False
    )


def test_ruff_lint_and_format() -> None:
    lint = run(str(BIN / "ruff"), "check", *PATHS)
    assert lint.returncode == 0, lint.stdout[-4000:]
    fmt = run(str(BIN / "ruff"), "format", "--check", *PATHS)
    assert fmt.returncode == 0, fmt.stdout[-4000:]


# A cold check (fresh clone, no .mypy_cache) beside the other test worker:
# a hang guard, not a time bound.
@pytest.mark.timeout(900)
def test_mypy() -> None:
    result = run(str(BIN / "mypy"), "services", "gateway", "rag_client", "bench")
    assert result.returncode == 0, result.stdout[-4000:]
