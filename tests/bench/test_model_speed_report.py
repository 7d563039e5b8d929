"""The model-speed section renders one row per model from its result file."""

from __future__ import annotations

import pytest

from bench.reports.model_speed import model_speed_section

pytestmark = pytest.mark.unit


def _values(query_ms: float, rps: float) -> dict[str, object]:
    return {
        "query_embedding_ms": query_ms,
        "indexing": {"chunks": 900, "seconds": 30.0, "chunks_per_s": 30.0},
        "retrieve_c1": {"p50_ms": 9.5, "p99_ms": 20.1},
        "retrieve_c16_rps": rps,
        "memory": {"rss_mib": 900.0, "peak_rss_mib": 1200.0},
    }


def test_one_row_per_model_with_every_figure() -> None:
    result = {
        "command": "python -m bench.load.model_speed",
        "date": "2026-11-26T00:00:00+00:00",
        "git_revision": "abc",
        "machine": {
            "cpu": "x",
            "logical_cpus": 2,
            "memory_gib": 23.5,
            "python": "3.11",
            "torch": "2.13.0",
            "torch_threads": 2,
            "load_average_1m": 0.1,
        },
        "documents": 400,
        "queries": 200,
        "models": {"packaged:a": _values(4.5, 110.0), "packaged:b": _values(13.0, 41.5)},
    }
    section = model_speed_section(result)
    assert "| packaged:a | 4.5 | 9.5 | 20.1 | 110.0 | 30.0 | 900.0 | 1200.0 |" in section
    assert "| packaged:b | 13.0 |" in section and "41.5" in section
