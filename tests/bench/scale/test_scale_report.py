"""The scale section judges the 1M targets from the measured figures."""

from __future__ import annotations

from typing import Any

import pytest

from bench.reports.scale import scale_targets

pytestmark = pytest.mark.unit


def _size(
    p50: float, p99: float, scoped_p50: float, peak_mib: float, recall: float
) -> dict[str, Any]:
    def row(scope: str, p50_ms: float, p99_ms: float) -> dict[str, Any]:
        latency = {"p50_ms": p50_ms, "p95_ms": p99_ms, "p99_ms": p99_ms}
        return {"filter": scope, "concurrency": 1, "latency_ms": latency}

    return {
        "retrieve": [row("none", p50, p99), row("1% scope", scoped_p50, p99)],
        "memory": {"after load": {"peak_rss_mib": peak_mib}},
        "recall_at_10": {"none": recall},
    }


def test_targets_met_and_missed_by_how_much() -> None:
    verdicts = [t["verdict"] for t in scale_targets(_size(20, 70, 15, 3000, 0.97))]
    assert verdicts == ["met"] * 5
    missed = scale_targets(_size(45, 70, 50, 5120, 0.9))
    assert missed[0]["verdict"] == "missed by 15 ms"
    assert missed[1]["verdict"] == "met"
    assert missed[2]["verdict"].startswith("missed by 0.111")
    assert missed[3]["verdict"] == "missed by 1 GiB"
    assert missed[4]["verdict"] == "missed by 0.05"
