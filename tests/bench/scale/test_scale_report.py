"""The scale section judges docs/targets.md's 1M targets from the measured figures."""

from __future__ import annotations

from typing import Any

import pytest

from bench.reports.scale import _cap_table, _probe_table, build_mode, scale_targets
from bench.reports.scale_capped import capped_rows, capped_table

pytestmark = pytest.mark.unit


def _size(p50: float, p99: float, stack_mib: float, writer_mib: float, recall: float) -> dict:
    def row(scope: str) -> dict[str, Any]:
        latency = {"p50_ms": p50, "p95_ms": p99, "p99_ms": p99}
        return {"filter": scope, "concurrency": 1, "latency_ms": latency}

    return {
        "retrieve": [row("none"), row("1% scope")],
        "memory": {"after load": {"peak_rss_mib": stack_mib, "anon_mib": 1024.0}},
        "writer_peak_rss_mib": writer_mib,
        "writer_peak_parts_mib_by_phase": {
            "rows written": {"anon": 1500, "file": 2000},
            "vector index (HNSW)": {"anon": 2600, "file": 3100},
        },
        "recall_at_10": {"none": recall},
    }


def test_targets_met() -> None:
    verdicts = [t["verdict"] for t in scale_targets(_size(20, 50, 3000, 4096, 0.98))]
    assert verdicts == ["met"] * 5


def test_missed_targets_say_by_how_much() -> None:
    p50, p99, stack, writer, recall = scale_targets(_size(45, 70, 5120, 6144, 0.9))
    assert p50["verdict"].startswith("missed by 25 ms")
    assert p99["verdict"].startswith("missed by 20 ms")
    assert stack["verdict"].startswith("missed by 1 GiB")
    assert writer["verdict"].startswith("missed by 2 GiB")
    assert recall["verdict"].startswith("missed by 0.08")


def test_writer_target_notes_its_own_and_file_page_peaks() -> None:
    writer = scale_targets(_size(20, 50, 3000, 6144, 0.98))[3]
    assert "2.54 GiB" in writer["note"]  # the largest anonymous peak over the phases
    assert "3.03 GiB" in writer["note"]  # the largest file-page peak


def test_a_build_under_a_memory_limit_is_shown_with_what_the_cgroup_saw() -> None:
    size = _size(20, 50, 3000, 3900, 0.98)
    size["writer_memory_cap"] = {
        "limit_mib": 4096,
        "held_at_entry_mib": 1025,
        "peak_mib": 4096,
        "limit_hits": 123456,
        "oom_kills": 0,
    }
    writer = scale_targets(size)[3]
    assert writer["verdict"] == "met"
    assert "hard 4096 MiB limit" in writer["note"] and "completed" in writer["note"]
    assert "123,456 times" in writer["note"]
    size["write_seconds"], size["write_total_s"], size["chunks"] = {"vectors": 1.0}, 9.0, 10
    section = _cap_table([size])
    assert section[0].startswith("### The writer under a hard memory limit")
    once = "in the writer, once after the last run"
    assert f"| 10 | {once} | 4096 | 1025 | 4096 | 123,456 | 0 | – | 0 | 9 |" in section[2]


def test_no_memory_limit_no_limit_section() -> None:
    assert _cap_table([_size(20, 50, 3000, 3900, 0.98)]) == []


def test_the_build_mode_says_where_hnsw_was_built_and_how_often() -> None:
    assert build_mode({}) == "in the writer, once after the last run"
    apart = {"optimize_apart": True, "optimize_each_run": True, "optimizations": 131}
    assert build_mode(apart) == (
        "in a child process on a shard copy, asked after every run as the Indexer asks "
        "(deferred while runs come, settled after the last), 131 builds"
    )
    assert build_mode({"optimize_apart": True}).endswith("once after the last run")


def _probe_row(unindexed: int, points: int, none: float, scoped: float, **extra: Any) -> dict:
    p50 = {"none": none, "1% scope": scoped}
    return {"points": points, "unindexed": unindexed, "search_p50_ms": p50, **extra}


def test_the_probe_table_shows_the_most_unindexed_the_slowest_and_the_settled_search() -> None:
    size = _size(20, 50, 3000, 3900, 0.98)
    size["chunks"] = 300_000
    size["search_during_load"] = {
        "every_runs": 20,
        "rows": [
            _probe_row(60_000, 250_000, 9.0, 1.0),
            _probe_row(70_000, 280_000, 8.5, 1.1),  # most unindexed, not the slowest
            _probe_row(0, 290_000, 4.0, 0.9),
            _probe_row(0, 300_000, 3.5, 0.8, settled=True),
        ],
    }
    section = _probe_table([size])
    assert section[0].startswith("### The vector search while the load runs")
    row = (
        "| 300,000 | 3 | 70,000 of 280,000 | 8.5 / 1.1 | 9.0 / 1.0 (60,000 unindexed) | 0 "
        "| 3.5 / 0.8 |"
    )
    assert row in section[2]


def test_no_probe_or_no_settled_row_no_probe_section() -> None:
    size = _size(20, 50, 3000, 3900, 0.98)
    assert _probe_table([size]) == []
    size["search_during_load"] = {"every_runs": 20, "rows": [_probe_row(1, 2, 1.0, 1.0)]}
    assert _probe_table([size]) == []


def _served(p50: float, p99: float, rps: float) -> list[dict[str, Any]]:
    latency = {"p50_ms": p50, "p95_ms": p99, "p99_ms": p99}
    return [
        {"filter": scope, "concurrency": c, "latency_ms": latency, "throughput_rps": rps,
         "errors": {}}
        for scope in ("none", "1% scope")
        for c in (1, 16)
    ]  # fmt: skip


def test_a_stack_served_under_a_memory_limit_is_shown_beside_the_unlimited_serving() -> None:
    size = _size(90, 195, 5000, 3900, 0.98)
    size["chunks"], size["retrieve"] = 1_000_000, _served(91.0, 195.1, 15.0)
    cap = {"limit_mib": 4096, "held_at_entry_mib": 0, "peak_mib": 4090, "limit_hits": 5210,
           "oom_kills": 0}  # fmt: skip
    after = {"rss_mib": 3900.0, "anon_mib": 1700.0, "file_mib": 2200.0}
    size["capped_serving"] = {
        "retrieve": _served(99.5, 240.0, 13.2),
        "memory": {"after load": after},
        "memory_cap": cap,
        "failure": "",
    }
    (row,) = capped_rows([size])
    assert row == (
        "1,000,000", 4096, "served", 4090, "5,210", "3900 (1700 / 2200)",
        "91.0 / 195.1 → 99.5 / 240.0", "91.0 → 99.5", "15.0 → 13.2",
    )  # fmt: skip
    stack = scale_targets(size)[2]
    assert stack["verdict"].startswith("missed")  # the target is the unlimited RSS
    assert (
        "under a hard 4096 MiB limit: served, c=1 p50 / p99 91.0 / 195.1 → 99.5" in (stack["note"])
    )
    killed = {
        "memory_cap": {**cap, "oom_kills": 1},
        "failure": "RuntimeError: exited with -9",
    }
    size["capped_serving"] = killed
    assert capped_rows([size])[0][2].startswith("failed (1 OOM kills): RuntimeError")
    assert "limit: failed" in scale_targets(size)[2]["note"]


def test_no_stack_limit_no_capped_section() -> None:
    assert capped_table([_size(20, 50, 3000, 3900, 0.98)]) == []
