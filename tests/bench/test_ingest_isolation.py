"""The pure parts of the Retrieve-while-ingesting benchmark: the corpus sent as
new documents, the CLI's summary line, the summaries and targets, the stall
windows read from the stack's log and the report section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.load.ingest_isolation import done_counts, renamed_corpus, summarise
from bench.load.paced_load import Sample
from bench.load.stall_windows import Window, in_flight, optimize_windows, stall_summary
from bench.reports.ingest_isolation import (
    consecutive_section,
    isolation_section,
    optimize_section,
    priority_section,
)
from bench.reports.targets import isolation_targets
from tests.bench.records import MACHINE

pytestmark = pytest.mark.unit

T0 = 1_795_000_000.0  # a Unix time


def test_renamed_corpus_prefixes_ids_and_keeps_texts(tmp_path: Path) -> None:
    source = tmp_path / "corpus.jsonl"
    docs = [{"_id": n, "title": f"t{n}", "text": f"body {n}"} for n in range(5)]
    source.write_text("".join(json.dumps(d) + "\n\n" for d in docs))
    written = renamed_corpus(source, tmp_path / "out.jsonl", limit=3).read_text().splitlines()
    assert [json.loads(line) for line in written] == [
        {"_id": f"ingest-{n}", "title": f"t{n}", "text": f"body {n}"} for n in range(3)
    ]
    everything = renamed_corpus(source, tmp_path / "all.jsonl", limit=0)
    assert len(everything.read_text().splitlines()) == 5


def test_done_counts_reads_the_cli_summary_line() -> None:
    output = "progress...\ndone: added=5, changed=0, chunks_to_embed=12\n"
    assert done_counts(output) == {"added": 5, "changed": 0, "chunks_to_embed": 12}
    with pytest.raises(RuntimeError, match="no summary line"):
        done_counts("indexer error: UNAVAILABLE")


def test_summarise_counts_degraded_answers_by_reason_and_errors() -> None:
    timeout = "vector: timeout: timed out after 1000 ms"
    samples = [
        Sample(10.0, T0, stages_ms={"vector": 6.0, "lexical": 2.0}),
        Sample(1010.0, T0 + 1, degraded=(timeout,), stages_ms={"vector": 1000.0, "lexical": 3.0}),
        Sample(30_000.0, T0 + 2, error="DEADLINE_EXCEEDED"),
    ]
    summary = summarise(samples, seconds=2.0)
    assert summary["requests"] == 3 and summary["latency"]["n"] == 2
    assert summary["degraded"] == 1 and summary["degraded_reasons"] == {timeout: 1}
    assert summary["errors"] == {"DEADLINE_EXCEEDED": 1}
    assert summary["server_stage_ms"]["vector"]["max_ms"] == 1000.0
    assert summary["slowest"][0]["latency_ms"] == 30_000.0


def _result(idle_p99: float, during_p99: float, degraded: int) -> dict[str, Any]:
    def phase(p99: float, count: int) -> dict[str, Any]:
        summary = summarise([Sample(p99, T0)], 1.0)
        return {**summary, "degraded": count}

    return {"idle": phase(idle_p99, 0), "during_ingest": phase(during_p99, degraded)}


def test_targets_are_zero_degraded_and_p99_within_three_times_idle() -> None:
    met = isolation_targets(_result(20.0, 59.0, 0))
    assert [t["met"] for t in met] == [True, True] and met[1]["measured"] == 2.95
    missed = isolation_targets(_result(20.0, 80.0, 2))
    assert [t["met"] for t in missed] == [False, False]
    assert missed[0]["verdict"] == "missed by 2"


def test_optimize_windows_come_from_the_stack_log(tmp_path: Path) -> None:
    log = tmp_path / "stack.log"
    log.write_text(
        "2026-11-23T20:55:12.000000Z [info     ] index_run          added=64\n"
        "2026-11-23T20:55:57.750000Z [info     ] vector_index_optimized  seconds=1.75 store=x\n"
    )
    (window,) = optimize_windows(log)
    assert window.end - window.start == pytest.approx(1.75)
    assert optimize_windows(tmp_path / "missing.log") == []


def test_answers_in_flight_during_a_stall_are_counted() -> None:
    window = Window(T0 + 10, T0 + 12)
    before = Sample(5.0, T0 + 9)  # answered before the stall began
    spanning = Sample(1500.0, T0 + 9.9, degraded=("vector: timeout",))
    inside = Sample(900.0, T0 + 11)
    after = Sample(5.0, T0 + 12.5)
    assert in_flight([before, spanning, inside, after], [window]) == [spanning, inside]
    summary = stall_summary([before, spanning, inside, after], [window])
    assert (summary["answers_in_flight"], summary["degraded_in_flight"]) == (2, 1)


def test_the_section_shows_before_and_after_rows() -> None:
    current = {
        **_result(20.0, 50.0, 0),
        "pacing": {"clients": 4, "interval_ms": 100},
        "ingest": {"documents": 9, "chunks": 20, "scope": "s", "seconds": 4.0, "chunks_per_s": 5.0},
        "vector_optimize": stall_summary([], [Window(T0, T0 + 1.5)]),
    }
    before = {**current, **_result(20.0, 3000.0, 7), "command": "c", "date": "d"}
    before["git_revision"] = "abc"
    before["machine"] = MACHINE
    page = isolation_section({"ingest_isolation": current}, before)
    rows = [line for line in page.splitlines() if line.startswith("| before") or "| this" in line]
    assert len(rows) == 4
    assert "| before the fix | during the ingest | 1 | 3000.0 |" in page
    assert "optimised its segments 1 time(s) (1.5 s)" in page


def test_the_optimize_section_sets_apart_and_in_process_side_by_side() -> None:
    def run(during_p99: float, seconds: list[float]) -> dict[str, Any]:
        windows = [Window(T0, T0 + s) for s in seconds]
        return {
            **_result(20.0, during_p99, 0),
            "vector_optimize": stall_summary([], windows),
            "command": "c",
            "date": "d",
            "git_revision": "abc",
            "machine": MACHINE,
        }

    page = optimize_section({"apart": run(50.0, [4.9]), "inline": run(5000.0, [4.6])})
    assert "| apart | during the ingest | 1 | 50.0 |" in page
    assert "| inline | during the ingest | 1 | 5000.0 |" in page
    assert "| apart | 1 | 4.9 | 2.5 |" in page
    assert "| inline | 1 | 4.6 | 250.0 |" in page


def _recorded_run(idle_p99: float, during_p99: float, chunks_per_s: float) -> dict[str, Any]:
    """A whole run's record, as `python -m bench.load.ingest_isolation` writes it."""
    return {
        **_result(idle_p99, during_p99, 0),
        "ingest": {
            "documents": 9,
            "chunks": 20,
            "scope": "s",
            "seconds": 4.0,
            "chunks_per_s": chunks_per_s,
        },
        "command": "c",
        "date": "d",
        "git_revision": "abc",
        "machine": MACHINE,
    }


def test_consecutive_runs_are_judged_each_against_its_own_idle_p99() -> None:
    page = consecutive_section([_recorded_run(20.0, 50.0, 5.0), _recorded_run(10.0, 40.0, 5.0)])
    assert "| 1 | 20.0 | 50.0 | 2.5 | met | 0 | 5.0 |" in page
    assert "| 2 | 10.0 | 40.0 | 4.0 | missed | 0 | 5.0 |" in page


def test_the_priority_section_sets_index_work_before_and_lowered_side_by_side() -> None:
    page = priority_section(_recorded_run(40.0, 150.0, 17.0), _recorded_run(40.0, 50.0, 15.5))
    before, lowered = "index work at the process's priority (before)", "index work at nice 10"
    assert f"| {before} | during the ingest | 1 | 150.0 |" in page
    assert f"| {lowered} (first consecutive run) | during the ingest | 1 | 50.0 |" in page
    assert f"| {lowered} (first consecutive run) | 15.5 |" in page
