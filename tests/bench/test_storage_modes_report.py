"""The storage-modes section of docs/benchmarks.md: rendered from a result
shaped like bench/results/storage-modes.json, and on the page when it exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.reports.storage_modes import RESULTS_FILE, storage_modes_section
from tests.bench.records import TEST_MACHINE, page_before_and_after

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
        "machine": TEST_MACHINE,
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
    before, after = page_before_and_after(tmp_path, RESULTS_FILE, result())
    assert HEADING not in before
    assert HEADING in after


def test_section_names_the_server_settings_and_the_second_vector() -> None:
    plain = storage_modes_section(result())
    assert "its default settings" in plain and "Chunks carry one vector" in plain
    tuned = result()
    tuned["postgres_settings"] = {"shared_buffers": "1GB"}
    tuned["copy_to_postgres"]["second_vector_dim"] = 512
    section = storage_modes_section(tuned)
    assert "set with `shared_buffers = 1GB`" in section
    assert "a second (512-d) vector, copied too" in section
