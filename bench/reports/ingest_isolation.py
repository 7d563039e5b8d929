"""The "Retrieve while an ingest runs" part of the speed section of
docs/benchmarks.md, from bench.json's `ingest_isolation` (this run) and, when
kept, `ingest_isolation_before.json` (the same measurement on the code before
queries went ahead of document passes, with its own provenance).

bench.reports.page renders the page; this part is placed into it right after,
before "### Speed targets" (the two targets themselves are in bench.json's
targets, so that table shows them in any case)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.reports.markdown import provenance, table

BEFORE_FILE = "ingest_isolation_before.json"
# The vector index built apart (child process, the default) and in-process,
# each a `python -m bench.load.ingest_isolation` run with its own provenance.
OPTIMIZE_FILES = {
    "built apart (default)": "ingest_isolation_optimize_apart.json",
    "built in-process (RAG_VECTOR_OPTIMIZE_APART=false)": "ingest_isolation_optimize_inline.json",
}
HEADERS = (
    "code",
    "phase",
    "requests",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "max ms",
    "degraded answers",
    "degraded by",
    "errors",
    "server vector stage p99 ms",
    "server lexical stage p99 ms",
)


def isolation_section_of(bench: dict[str, Any], results_dir: Path) -> str:
    """The section for the speed page ("" when the run measured no ingest)."""
    if "ingest_isolation" not in bench:
        return ""
    section = isolation_section(bench, _load(results_dir / BEFORE_FILE))
    runs = {label: _load(results_dir / name) for label, name in OPTIMIZE_FILES.items()}
    if all(runs.values()):
        section += "\n" + optimize_section({k: v for k, v in runs.items() if v})
    consecutive = [_load(path) for path in sorted(results_dir.glob(CONSECUTIVE_GLOB))]
    if consecutive:
        section += "\n" + consecutive_section([run for run in consecutive if run])
    before = _load(results_dir / BETWEEN_FILE)
    if before is not None:
        section += "\n" + scheduling_section(before, consecutive[-1] if consecutive else None)
    unlowered = _load(results_dir / UNLOWERED_FILE)
    if unlowered is not None and consecutive and consecutive[0] is not None:
        section += "\n" + priority_section(unlowered, consecutive[0])
    return section


# Runs of `python -m bench.load.ingest_isolation` one after the other on one
# revision (ingest_isolation_consecutive_1.json, _2, ...): the p99 target holds
# only if it holds in each.
CONSECUTIVE_GLOB = "ingest_isolation_consecutive_*.json"
# The same measurement with document passes between query passes (the code
# before they ran alongside on ONNX Runtime).
BETWEEN_FILE = "ingest_isolation_documents_between.json"
RATIO_TARGET = 3.0
# The same measurement before index work ran at a lower CPU priority
# (RAG_INDEX_WORK_NICE; services.core.thread_priority).
UNLOWERED_FILE = "ingest_isolation_index_work_unlowered.json"


def consecutive_section(runs: list[dict[str, Any]]) -> str:
    rows = [
        (
            n,
            run["idle"]["latency"]["p99_ms"],
            run["during_ingest"]["latency"]["p99_ms"],
            _ratio(run),
            "met" if _ratio(run) <= RATIO_TARGET else "missed",
            run["during_ingest"]["degraded"],
            run["ingest"]["chunks_per_s"],
        )
        for n, run in enumerate(runs, start=1)
    ]
    headers = ("run", "idle p99 ms", "during-ingest p99 ms", "ratio", f"≤ {RATIO_TARGET:g}")
    return "\n".join(
        [
            "### p99 during an ingest, consecutive runs\n",
            "The same measurement repeated on one revision, one run after the other, each with "
            "its own idle phase.\n",
            *(f"- run {n}: {provenance(run)}" for n, run in enumerate(runs, start=1)),
            table((*headers, "degraded answers", "ingest chunks/s"), rows),
        ]
    )


def scheduling_section(between: dict[str, Any], alongside: dict[str, Any] | None) -> str:
    """Document passes between query passes (before) and alongside them (now)."""
    runs = {"documents between queries (before)": between}
    if alongside is not None:
        runs["documents alongside queries (last consecutive run)"] = alongside
    rows = [row for label, run in runs.items() for row in _rows(label, run)]
    return "\n".join(
        [
            "### Document passes alongside query passes vs between them\n",
            "On ONNX Runtime a query pass no longer waits for the document pass in progress "
            "(docs/indexing.md).\n",
            *(f"- {label}: {provenance(run)}" for label, run in runs.items()),
            table(HEADERS, rows),
        ]
    )


def priority_section(unlowered: dict[str, Any], lowered: dict[str, Any]) -> str:
    """Index work at the process's priority (before) and lowered (the first consecutive run)."""
    runs = {
        "index work at the process's priority (before)": unlowered,
        "index work at nice 10 (first consecutive run)": lowered,
    }
    rows = [row for label, run in runs.items() for row in _rows(label, run)]
    return "\n".join(
        [
            "### Index work at a lower CPU priority vs at the process's\n",
            "The Indexer's run threads and its document encoder's compute threads run at nice "
            "10 (RAG_INDEX_WORK_NICE, docs/indexing.md): queries get the cores first while an "
            "ingest runs.\n",
            *(f"- {label}: {provenance(run)}" for label, run in runs.items()),
            table(HEADERS, rows),
            table(
                ("code", "ingest chunks/s during the load"),
                [(label, run["ingest"]["chunks_per_s"]) for label, run in runs.items()],
            ),
        ]
    )


def optimize_section(runs: dict[str, dict[str, Any]]) -> str:
    """The same ingest with the vector index built apart and in-process."""
    rows = [row for label, run in runs.items() for row in _rows(label, run)]
    stalls = [
        (label, run["vector_optimize"]["optimizations"], _seconds(run), _ratio(run))
        for label, run in runs.items()
    ]
    return "\n".join(
        [
            "### The vector index built apart vs in-process (same ingest, same load)\n",
            "Qdrant Edge holds the GIL for its whole HNSW build; built apart, the build runs "
            "on a copy of the shard in a child process and the copy is swapped in "
            "(docs/indexing.md). A build stalls only the answers in flight while it runs, so "
            "it shows in the maximum and in degraded answers more than in p99; p99 during the "
            "ingest is set by the queries waiting for the model behind document passes. Each "
            "ratio is to the run's own idle p99, which over ~1,200 requests is noisy.\n",
            *(f"- {label}: {provenance(run)}" for label, run in runs.items()),
            table(HEADERS, rows),
            table(("code", "index builds during the ingest", "their seconds", "p99 ratio"), stalls),
        ]
    )


def _seconds(run: dict[str, Any]) -> str:
    return ", ".join(f"{s:g}" for s in run["vector_optimize"]["seconds"]) or "none"


def _ratio(run: dict[str, Any]) -> float:
    idle, during = run["idle"]["latency"]["p99_ms"], run["during_ingest"]["latency"]["p99_ms"]
    return round(during / idle, 2)


def isolation_section(bench: dict[str, Any], before: dict[str, Any] | None) -> str:
    current = bench["ingest_isolation"]
    rows = _rows("this run", current)
    parts = ["### Retrieve while an ingest runs (embedded stack)\n", _note(bench, current)]
    if before is not None:
        rows = _rows("before the fix", before) + rows
        parts.append(_before_note(before))
    parts.append(table(HEADERS, rows))
    if stalls := current.get("vector_optimize"):
        parts.append(_stall_note(stalls, current["during_ingest"]["degraded"]))
    return "\n".join(parts)


def _stall_note(stalls: dict[str, Any], degraded: int) -> str:
    seconds = ", ".join(f"{s:g} s" for s in stalls["seconds"]) or "none"
    return (
        f"During this run's ingest the Indexer's vector store optimised its segments "
        f"{stalls['optimizations']} time(s) ({seconds}). Qdrant Edge (qdrant-edge-py 0.9.0) holds "
        "the GIL throughout `EdgeShard.optimize()`; built in-process "
        "(RAG_VECTOR_OPTIMIZE_APART=false) the whole stack process pauses meanwhile, built apart "
        f"(the default) it does not. {stalls['answers_in_flight']} answers were in flight during "
        f"the builds, {stalls['degraded_in_flight']} of them degraded, of the {degraded} "
        "degraded answers of the phase (bench.load.stall_windows, from the stack's "
        "`vector_index_optimized` log lines).\n"
    )


def _note(bench: dict[str, Any], result: dict[str, Any]) -> str:
    pacing, ingest = result["pacing"], result["ingest"]
    rate = pacing["clients"] * 1000 / pacing["interval_ms"]
    alone = bench.get("indexing", {}).get("chunks_per_s")
    return (
        f"`python -m services.stack` on a copy of the index above. {pacing['clients']} clients, "
        f"each sending the next SciFact test claim {pacing['interval_ms']} ms after its previous "
        f"one started (at once after a slower answer; at most {rate:g} requests/s in all), query "
        f"cache off, no reranking: first idle for {result['idle']['seconds']} s, then while the "
        f"operator CLI (`python -m services.operator.cli ingest`, its own process) sent "
        f"{ingest['documents']} SciFact documents again as new ones ({ingest['chunks']} chunks) "
        f"into scope `{ingest['scope']}` of the same stack: {ingest['seconds']} s, "
        f"{ingest['chunks_per_s']} chunks/s (indexing alone, above: {alone} chunks/s). "
        "A degraded answer is one with a non-empty `degraded` list; the stage times are the "
        "server's own (the vector stage includes the query embedding).\n"
    )


def _before_note(before: dict[str, Any]) -> str:
    ingest = before["ingest"]
    return (
        "Before the fix (the model lock held for a whole document batch, up to 256 chunks), "
        f"the same measurement; its ingest: {ingest['chunks']} chunks in {ingest['seconds']} s "
        f"({ingest['chunks_per_s']} chunks/s). " + provenance(before)
    )


def _rows(label: str, result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        _row(label, "idle", result["idle"]),
        _row(label, "during the ingest", result["during_ingest"]),
    ]


def _row(label: str, phase: str, summary: dict[str, Any]) -> tuple[Any, ...]:
    latency, stages = summary["latency"], summary["server_stage_ms"]
    reasons = "; ".join(f"{k} ({v})" for k, v in summary["degraded_reasons"].items())
    errors = ", ".join(f"{k} {v}" for k, v in summary["errors"].items()) or "0"
    return (
        label,
        phase,
        summary["requests"],
        latency["p50_ms"],
        latency["p95_ms"],
        latency["p99_ms"],
        latency["max_ms"],
        summary["degraded"],
        reasons or "—",
        errors,
        stages["vector"]["p99_ms"],
        stages["lexical"]["p99_ms"],
    )


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None
