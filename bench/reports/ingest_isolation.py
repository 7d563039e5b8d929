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
    return isolation_section(bench, _load(results_dir / BEFORE_FILE))


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
        "the GIL throughout `EdgeShard.optimize()`, so the whole stack process, event loop "
        f"included, pauses meanwhile: {stalls['answers_in_flight']} answers were in flight then "
        f"(each as slow as the pause), {stalls['degraded_in_flight']} of them degraded, of the "
        f"{degraded} degraded answers of the phase (bench.load.stall_windows, from the stack's "
        "`vector_index_optimized` log lines). Whether an answer caught in a pause comes back "
        "degraded depends on whether its channels had started when the pause began.\n"
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
        f"operator CLI (`python -m services.indexer.cli ingest`, its own process) sent "
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
