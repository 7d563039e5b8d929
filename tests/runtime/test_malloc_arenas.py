"""The malloc arena limit every service process starts with
(services.runtime.malloc_arenas); its effect on memory is measured by
`python -m bench.load.dry_run_memory`, not asserted here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.runtime.malloc_arenas import limit_malloc_arenas

pytestmark = pytest.mark.unit


def test_the_limit_is_set_on_glibc_when_the_operator_set_none() -> None:
    # A fresh interpreter: mallopt then runs before any of its threads exist.
    script = "from services.runtime.malloc_arenas import limit_malloc_arenas as f; print(f({}))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_the_operators_malloc_arena_max_is_left_to_glibc() -> None:
    assert limit_malloc_arenas({"MALLOC_ARENA_MAX": "8"}) is False
