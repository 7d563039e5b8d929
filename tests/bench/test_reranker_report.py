"""The Reranker section of docs/benchmarks.md: rendered from a result shaped
like bench/results/reranker.json, and placed on the page when that file exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.reports.reranker import RESULTS_FILE, reranker_section
from tests.bench.records import TEST_MACHINE, page_before_and_after

pytestmark = pytest.mark.unit

HEADING = "## Reranker: torch vs ONNX Runtime (fp32, int8)"


def _stats(p50: float, p95: float, size: int) -> dict[str, Any]:
    return {
        "n": 3,
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p95 + 1,
        "mean_ms": p50,
        "max_ms": p95 + 2,
        "pairs_per_s": round(size / p50 * 1000, 1),
    }


def result() -> dict[str, Any]:
    """Three backends, 5 and 20 passages per call; pairs/s: torch 12.5, onnx 25, int8 83.3."""
    p50s = {"torch": (400.0, 1600.0), "onnx": (200.0, 800.0), "onnx-int8": (50.0, 250.0)}
    return {
        "command": "python -m bench.load.reranker --rounds 3",
        "date": "2026-11-24T00:00:00+00:00",
        "git_revision": "abc123",
        "machine": TEST_MACHINE,
        "load_average_1m_after": 0.7,
        "config": {
            "architecture": "BERT 384 hidden, 6 layers, 12 heads, 1536 intermediate (MiniLM-L6)",
            "weights": "packaged",
            "max_length": 256,
            "batch_size": 8,
            "passage_chars": 800,
            "tokens_per_pair": {"mean": 191.0, "min": 173, "max": 203},
            "sizes": [5, 20],
            "rounds": 3,
            "onnx_int8": "quantize_dynamic",
        },
        "service_defaults": {
            "rerank_backend": "torch",
            "rerank_batch_size": 8,
            "rerank_max_length": 256,
            "rerank_onnx_spin": False,
            "rerank_candidates": 20,
            "rerank_budget_ms": 300,
        },
        "load_s": {"torch": 0.1, "onnx": 2.0, "onnx-int8": 3.0},
        "results": {
            label: {
                "sizes": {
                    "5": _stats(small, small + 10, 5),
                    "20": _stats(large, large + 40, 20),
                },
                "pairs_per_s": round(25 / (small + large) * 1000, 1),
            }
            for label, (small, large) in p50s.items()
        },
        "drift": {
            "pairs": 50,
            "torch_score_std": 0.0043,
            "onnx": {"max_abs": 4.5e-08, "mean_abs": 1.6e-08, "spearman": 1.0, "same_top5": True},
            "onnx-int8": {
                "max_abs": 0.00708,
                "mean_abs": 0.00204,
                "spearman": 0.864,
                "same_top5": False,
            },
        },
        "speedup_vs_torch": {"torch": 1.0, "onnx": 2.0, "onnx-int8": 6.66},
    }


def test_section_shows_the_run_latencies_speedups_and_drift() -> None:
    text = reranker_section(result())
    assert text.startswith(HEADING)
    assert "Command `python -m bench.load.reranker --rounds 3`" in text
    assert "revision `abc123`" in text
    assert "3 rounds" in text and "800 characters" in text and "191 tokens" in text
    assert "BERT 384 hidden, 6 layers, 12 heads, 1536 intermediate" in text
    lines = text.splitlines()
    # backend × passages per call: p50, p95, p50 speed-up against torch's p50 of that size
    assert "| torch | 20 | 3 | 1600.0 | 1640.0 |" in text
    int8_20 = next(line for line in lines if line.startswith("| ONNX int8 | 20 |"))
    assert "| 250.0 | 290.0 |" in int8_20 and int8_20.endswith("| 6.40x |")
    fp32_5 = next(line for line in lines if line.startswith("| ONNX fp32 | 5 |"))
    assert fp32_5.endswith("| 2.00x |")
    # overall: pairs/s, its ratio to torch's, load seconds
    assert "| ONNX int8 | 83.3 | 6.66x | 3.00 |" in text
    # drift of each ONNX path against torch
    assert "| ONNX fp32 | 4.5e-08 | 1.6e-08 | 1.000 | yes |" in text
    assert "| ONNX int8 | 0.00708 | 0.00204 | 0.864 | no |" in text
    assert "0.0043" in text


def test_section_names_the_default_backend_and_the_budget() -> None:
    text = reranker_section(result())
    assert "`RAG_RERANK_BACKEND` defaults to `torch`" in text
    assert "int8 scored 6.66x the default's pairs/s" in text
    assert "docs/targets.md sets no latency target for the Reranker" in text
    assert "torch 1600 ms, over by 1300 ms (433%)" in text
    assert "ONNX int8 250 ms, fits with 50 ms to spare" in text


def test_section_warns_when_the_machine_was_busier_than_its_cpus() -> None:
    assert "other work shared the machine" not in reranker_section(result())
    busy = result()
    busy["load_average_1m_after"] = 3.5
    assert "more than the 2 CPUs: other work shared the machine" in reranker_section(busy)


def test_section_renders_an_older_result_without_the_newer_fields() -> None:
    old = result()
    del old["service_defaults"], old["config"]["tokens_per_pair"], old["load_s"]
    text = reranker_section(old)
    assert "did not record the service's defaults" in text
    assert "| torch | 5 | 3 | 400.0 |" in text


def test_page_includes_the_section_when_the_result_file_exists(tmp_path: Path) -> None:
    before, page = page_before_and_after(tmp_path, RESULTS_FILE, result())
    assert HEADING not in before
    assert page.count(HEADING) == 1
    assert "| ONNX int8 | 0.00708 | 0.00204 | 0.864 | no |" in page
