"""Runs a bench command the way a person does (`python -m bench...`), in the
repository, and fails the test with the command's own output when it fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A hang guard, not a speed check. A fresh data folder builds the default
# model's ONNX graphs before its first answer (fp32, then the int8 document
# encoder: ~3 minutes idle on two cores), so one eval command took 291 s on an
# idle machine (2026-11-30) and more beside other work.
COMMAND_TIMEOUT_S = 900


def run_bench_module(module: str, out: Path, *extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--smoke", "--out", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
