"""`python -m bench.scale` end to end at a toy size: a real stack serves the
index it builds, and the result file holds every figure the report needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.common.memory_cap import ChildMemoryCap, MemoryCapUnavailable
from bench.reports.scale import scale_section
from bench.scale.__main__ import main
from tests.bench.scale.conftest import needs_scifact

# On a fresh clone the run first builds the model's ONNX graph into
# bench/cache and embeds its source corpus there (once): minutes on two busy
# cores, so the default 300 s hang guard is too short for the cold run (a
# fresh-clone CI run timed out here). A guard against hangs, not a speed check.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.bench_smoke,
    needs_scifact,
    pytest.mark.timeout(1200),
]


def _stack_cap_available() -> bool:
    try:
        with ChildMemoryCap(64):
            return True
    except MemoryCapUnavailable:
        return False


def test_scale_bench_runs_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    argv = ["--sizes", "1500", "--requests", "10", "--source-docs", "60", "--recall-ef", "512"]
    capped = _stack_cap_available()  # a memory cgroup needs root
    argv += ["--stack-memory-cap", "4096"] if capped else []
    assert main([*argv, "--no-report", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (size,) = result["sizes"]
    assert size["chunks"] == 1500
    rows = {(row["filter"], row["concurrency"]): row for row in size["retrieve"]}
    assert set(rows) == {("none", 1), ("none", 16), ("1% scope", 1), ("1% scope", 16)}
    assert all(row["errors"] == {} and row["hits_mean"] > 0 for row in rows.values())
    assert size["recall_at_10"]["none"] == 1.0  # a plain segment searches exactly
    assert size["recall_at_10_by_ef"]["512"]["none"] == 1.0
    assert size["memory"]["after load"]["peak_rss_mib"] > 0
    assert (tmp_path / "scale.png").is_file()
    assert "| 1,500 | none | 16 |" in scale_section(result)
    if capped:  # served again inside the limit: every load answered, the cgroup saw it
        served = size["capped_serving"]
        assert served["failure"] == "" and served["memory_cap"]["oom_kills"] == 0
        assert 0 < served["memory_cap"]["peak_mib"] <= 4096
        assert len(served["retrieve"]) == 4
        assert all(r["errors"] == {} and r["hits_mean"] > 0 for r in served["retrieve"])
        assert "### The stack under a hard memory limit" in scale_section(result)
