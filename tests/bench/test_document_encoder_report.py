"""The int8 document encoder on the benchmark page: the speed benchmark's
summaries and section (bench.load.document_encoder), and the SciFact
section's int8 row with its nDCG@10 difference against the target."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bench.load.document_encoder import drift, speed_summary
from bench.reports.document_encoder import SPEEDUP_TARGET, document_encoder_section
from bench.reports.scifact import INT8_DOCUMENTS, quality_section, scifact_targets
from tests.bench.records import TEST_MACHINE

pytestmark = pytest.mark.unit

RECORD = {
    "command": "python -m bench.load.document_encoder --chunks 4",
    "date": "2026-11-24T00:00:00+00:00",
    "git_revision": "abc123",
    "machine": TEST_MACHINE,
}


def test_speed_is_over_all_rounds_and_relative_to_onnx_fp32() -> None:
    seconds = {"onnx-fp32": [2.0, 2.0], "onnx-int8": [1.0, 1.25]}
    summary = speed_summary(seconds, chunks=100)
    assert summary["onnx-fp32"]["chunks_per_s"] == 50.0
    assert summary["onnx-int8"]["chunks_per_s"] == round(200 / 2.25, 1)
    assert summary["onnx-int8"]["speedup_vs_onnx_fp32"] == round(4.0 / 2.25, 2)
    assert summary["onnx-int8"]["round_speedups"] == [2.0, 1.6]
    assert summary["onnx-int8"]["round_chunks_per_s"] == [100.0, 80.0]


def test_drift_is_the_cosine_to_fp32_vectors() -> None:
    reference = np.eye(3, dtype=np.float32)
    tilted = np.array([[1, 0, 0], [0.6, 0.8, 0], [0, 0, 1]], dtype=np.float32)
    result = drift({"onnx-fp32": reference, "onnx-int8": tilted})
    assert list(result) == ["onnx-int8"]
    assert result["onnx-int8"]["min"] == pytest.approx(0.8)
    assert result["onnx-int8"]["mean"] == pytest.approx(2.8 / 3, abs=1e-5)


def speed_result(speedup: float) -> dict[str, Any]:
    seconds = {"onnx-fp32": [2.0], "onnx-int8": [2.0 / speedup]}
    speed = speed_summary(seconds, chunks=100)
    return {
        **RECORD,
        "load_average_1m_after": 0.7,
        "dataset": "scifact",
        "sample": {
            "documents": 5183,
            "corpus_chunks": 12508,
            "chunks": 100,
            "seed": 0,
            "chars_mean": 795.0,
            "chars_max": 1127,
        },
        "config": {
            "rounds": 1,
            "batch_size": 64,
            "document_pass_chars": 1000,
            "threads": "one per usable CPU",
            "omp_wait_policy": "PASSIVE",
            "int8": "quantize_dynamic, QInt8, per channel",
        },
        "load_s": {"onnx-fp32": 3.0, "onnx-int8": 2.0},
        "results": speed,
        "drift_vs_onnx_fp32": {"onnx-int8": {"min": 0.9902, "p1": 0.991, "mean": 0.9946}},
        "targets": [SPEEDUP_TARGET.assess(speed["onnx-int8"]["speedup_vs_onnx_fp32"])],
    }


@pytest.mark.parametrize(("speedup", "verdict"), [(1.95, "| met |"), (1.5, "missed by 0.3×")])
def test_the_section_shows_the_table_and_the_target(speedup: float, verdict: str) -> None:
    section = document_encoder_section(speed_result(speedup))
    assert section.startswith("## Document encoding")
    assert "Command `python -m bench.load.document_encoder --chunks 4`" in section
    assert "revision `abc123`" in section and "Test CPU" in section
    assert f"| onnx-int8 | {100 * speedup / 2:.1f} |" in section
    assert "0.9902 / 0.9910 / 0.9946" in section
    assert "≥ 1.8× fp32 chunks/s" in section and verdict in section


def eval_result(fp32: float, int8: float) -> dict[str, Any]:
    def config(ndcg: float) -> dict[str, Any]:
        metrics = dict.fromkeys(("recall@100", "mrr@10", "hit_rate@5", "precision@5"), 0.5)
        return {**metrics, "ndcg@10": ndcg, "latency": {"p50_ms": 10.0, "p95_ms": 20.0}}

    index = {"reused": False, "seconds": 100.0, "docs_per_s": 50.0, "chunks_per_s": 120.0}
    chunking = {
        "documents": 5183,
        "chunks": 12508,
        "target_chars": 800,
        "overlap_chars": 200,
        "max_chars": 1000,
        "version": "struct-v1",
        "title_as_heading": True,
        "embedding_model": "packaged:all-MiniLM-L6-v2",
    }
    result: dict[str, Any] = {
        **RECORD,
        "dataset": "scifact",
        "split": "test",
        "queries": 300,
        "configs": {"hybrid": config(fp32)},
        "not_measured": {},
        "peer": {"not_measured": "--no-peer"},
        "chunking": {**chunking, "document_encoders": ["onnx-fp32"]},
        "index": {**index, "reused": True},
        "request": {
            "top_k": 100,
            "max_chunks_per_document": 1,
            "candidates_per_channel": 300,
            "server_settings": {},
        },
        "int8_documents": {
            "configs": {"hybrid": config(int8)},
            "index": index,
            "chunking": {**chunking, "document_encoders": ["onnx-int8"]},
        },
    }
    result["targets"] = scifact_targets(result)
    return result


@pytest.mark.parametrize(
    ("int8", "verdict"), [(0.7140, "met"), (0.7100, "missed by 0.002 (40% of the target)")]
)
def test_the_quality_section_shows_the_int8_row_and_its_difference(
    int8: float, verdict: str
) -> None:
    result = eval_result(0.7170, int8)
    target = result["targets"][-1]
    assert target["measured"] == pytest.approx(0.7170 - int8) and target["verdict"] == verdict
    section = quality_section(result)
    assert f"| {INT8_DOCUMENTS} | {int8:.3f} |" in section
    assert f"a difference of {int8 - 0.7170:+.4f}" in section
    assert f"target |difference| ≤ 0.005: {verdict}" in section
    assert "document encoders onnx-int8" in section
