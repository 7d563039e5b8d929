"""Parts of bench result records that report tests build again and again, and
the benchmark page rendered around one of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.reports.page import write_report

# bench.common.record's machine block, with plain values.
MACHINE = {
    "cpu": "cpu",
    "logical_cpus": 2,
    "memory_gib": 1,
    "python": "3",
    "torch": "t",
    "torch_threads": 2,
    "load_average_1m": 0.1,
}

# A fuller machine block, for tests that look for its values on the page.
TEST_MACHINE = {
    "cpu": "Test CPU",
    "logical_cpus": 2,
    "memory_gib": 8.0,
    "python": "3.11.7",
    "torch": "2.13.0+cpu",
    "torch_threads": 2,
    "load_average_1m": 0.5,
}


def page_before_and_after(
    results_dir: Path, results_file: str, result: dict[str, Any]
) -> tuple[str, str]:
    """The benchmark page rendered from `results_dir` before and after `result`
    is written there as `results_file`."""
    docs = results_dir / "benchmarks.md"
    write_report(results_dir, docs)
    before = docs.read_text()
    (results_dir / results_file).write_text(json.dumps(result))
    write_report(results_dir, docs)
    return before, docs.read_text()
