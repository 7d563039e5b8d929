"""Run the peer pipeline (bench/peers/haystack_hybrid.py) in the benchmark
environment and score it with the same metrics code as the project."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.common.paths import BENCH_DIR, BENCH_VENV_PYTHON, CACHE_DIR, ROOT
from bench.common.record import latency_summary
from bench.eval.dataset import BeirDataset
from bench.eval.metrics import evaluate

PEER_SCRIPT = BENCH_DIR / "peers" / "haystack_hybrid.py"


def run_peer(dataset: BeirDataset, depth: int, timeout_s: float = 3600) -> dict[str, Any]:
    """Quality and latency of the peer on `dataset`, or why it was not measured."""
    if not BENCH_VENV_PYTHON.is_file():
        return {"not_measured": f"no benchmark environment ({BENCH_VENV_PYTHON}): make bench-env"}
    queries = list(dataset.queries().items())
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / "request.json"
        request.write_text(
            json.dumps(
                {
                    "corpus": str(dataset.corpus),
                    "queries": queries,
                    "depth": depth,
                    "cache_dir": str(CACHE_DIR),
                }
            )
        )
        done = subprocess.run(
            [str(BENCH_VENV_PYTHON), str(PEER_SCRIPT), str(request)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    if done.returncode != 0:
        return {"not_measured": f"peer failed (exit {done.returncode}): {done.stderr[-2000:]}"}
    output = json.loads(done.stdout)
    run = output.pop("run")
    latencies = output.pop("latencies_ms")
    return {
        **output,
        "depth": depth,
        "metrics": evaluate(dataset.qrels(), run),
        "latency": latency_summary(latencies),
    }
