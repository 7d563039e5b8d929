"""The storage-modes section of docs/benchmarks.md: rendered from a result
shaped like bench/results/storage-modes.json, and on the page when it exists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.reports.page import write_report
from bench.reports.storage_modes import RESULTS_FILE, storage_modes_section

pytestmark = pytest.mark.unit

HEADING = "## Storage modes: embedded and PostgreSQL"


def _mode(ndcg: tuple[float, float, float], p50: float, rps: float) -> dict[str, Any]:
    latency = {"n": 300, "p50_ms": p50, "p95_ms": p50 * 2, "p99_ms": p50 * 3}
    return {
        "quality": {
            name: {"ndcg@10": value, "recall@100": 0.9}
            for name, value in zip(("lexical", "vector", "hybrid"), ndcg, strict=True)
        },
        "serving": {
            "c1": {**latency, "requests_per_s": 1000 / p50},
            "c16": {**latency, "p50_ms": p50 * 8, "requests_per_s": rps},
        },
    }


def result() -> dict[str, Any]:
    return {
        "command": "python -m bench.eval.storage_modes",
        "date": "2026-11-26T00:00:00+00:00",
        "git_revision": "abc123",
        "machine": {
            "cpu": "Test CPU",
            "logical_cpus": 2,
            "memory_gib": 8.0,
            "python": "3.11.7",
            "torch": "2.13.0+cpu",
            "torch_threads": 2,
            "load_average_1m": 0.5,
        },
        "dataset": "scifact",
        "split": "test",
        "queries": 300,
        "copy_to_postgres": {
            "chunks": 9999,
            "seconds": 61.5,
            "vector_seconds": 40.1,
            "lexical_seconds": 21.4,
            "chunks_per_s": 162.6,
        },
        "modes": {
            "embedded": _mode((0.671, 0.681, 0.712), 22.5, 60.6),
            "postgres": _mode((0.669, 0.679, 0.707), 37.25, 41.3),
        },
    }


def test_section_puts_both_modes_side_by_side() -> None:
    section = storage_modes_section(result())
    assert section.startswith(HEADING)
    assert "| embedded | 0.671 | 0.681 | 0.712 | 0.900 |" in section
    assert "| postgres | 0.669 | 0.679 | 0.707 | 0.900 |" in section
    assert "| postgres | 37.2 | 111.8 | 298.0 | 111.8 | 41.3 |" in section
    assert "Copying 9999 chunks" in section and "162.6 chunks/s" in section
    assert "`python -m bench.eval.storage_modes`" in section and "abc123" in section


def test_page_includes_the_section_when_the_result_file_exists(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    write_report(tmp_path, docs)
    assert HEADING not in docs.read_text()
    (tmp_path / RESULTS_FILE).write_text(json.dumps(result()))
    write_report(tmp_path, docs)
    assert HEADING in docs.read_text()


def test_section_names_the_server_settings_and_the_second_vector() -> None:
    plain = storage_modes_section(result())
    assert "its default settings" in plain and "Chunks carry one vector" in plain
    tuned = result()
    tuned["postgres_settings"] = {"shared_buffers": "1GB"}
    tuned["copy_to_postgres"]["second_vector_dim"] = 512
    section = storage_modes_section(tuned)
    assert "set with `shared_buffers = 1GB`" in section
    assert "a second (512-d) vector, copied too" in section
