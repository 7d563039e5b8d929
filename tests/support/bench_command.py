"""Runs a bench command the way a person does (`python -m bench...`), in the
repository, and fails the test with the command's own output when it fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_bench_module(module: str, out: Path, *extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--smoke", "--out", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
