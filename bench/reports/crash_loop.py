"""The benchmark page's section on the crash loop, rendered from
bench/results/crash_loop.json (written by `python -m bench.load.crash_loop`)."""

from __future__ import annotations

from typing import Any

from bench.reports.markdown import provenance, table

RESULTS_FILE = "crash_loop.json"
MODE_NAMES = {"embedded": "embedded (Qdrant Edge, tantivy, SQLite)", "postgres": "PostgreSQL"}


def crash_loop_section(result: dict[str, Any]) -> str:
    every = [result["runs"][mode] for mode in MODE_NAMES if mode in result["runs"]]
    runs = [run for run in every if "not_run" not in run]
    rows = [_row(run) for run in runs]
    parts = [
        "## Crash loop: SIGKILL of the stack under writes and reads\n",
        "The stack (`python -m services.stack`) runs as its own process group and is killed "
        "with SIGKILL at seeded random moments, every third time before it is ready (during "
        "start-up, or the recovery of the run the previous kill cut short), then restarted; "
        "a writer upserts 1-3 small documents per call (1-3 chunks each, each with a unique "
        "token) and keeps a ledger of what the Indexer acknowledged, a reader runs Retrieve "
        "throughout (tests/support/crash_loop.py). At the end, on the stack restarted after "
        "the last kill: `verify` (the operator CLI), every acknowledged document looked up "
        "by its token, a dry-run Upsert of every document sent, and the three parts read "
        "directly. A document is *half-visible* when it is neither wholly there (manifest, "
        "vector rows and lexical rows the same chunk ids, as many as its plan) nor wholly "
        "absent; an acknowledged document not wholly there, or not found, is *lost*. "
        "The PostgreSQL server itself is not killed, only the stack. A bounded version "
        "(about 2 minutes, at least 10 kills per mode) runs in `make test` "
        "(tests/stack/test_crash_loop.py).\n",
        table(
            (
                "mode",
                "loop s",
                "kills",
                "of them before ready",
                "writes cut by a kill",
                "acknowledged",
                "lost",
                "unacknowledged",
                "of them visible",
                "half-visible",
                "verify",
                "restart to ready p50 / max s",
            ),
            rows,
        ),
    ]
    for run in runs:
        parts.append(f"{MODE_NAMES[run['mode']]}: " + provenance(run))
    for run in every:
        if "not_run" in run:
            parts.append(
                f"{MODE_NAMES[run['mode']]}: not run. {run['not_run']}. " + provenance(run)
            )
    parts.append(
        "The machine was shared with other engineers' builds and tests while these ran (see "
        "the load averages): restart times are inflated by that (most of "
        "a restart is the process's imports and model load, not recovery), and so is every "
        "write, hence few documents acknowledged per minute of uptime. Most unacknowledged "
        "documents were sent while the stack was down (refused at once, UNAVAILABLE); the "
        "ones that matter are the writes a kill cut, and the unacknowledged documents that "
        "are nevertheless wholly visible (committed, the reply lost to the kill).\n"
    )
    return "\n".join(parts)


def _row(run: dict[str, Any]) -> tuple[Any, ...]:
    f = run["figures"]
    ready = f["restart_to_ready_s"]
    return (
        run["mode"],
        f["loop_s"],
        f["kills"],
        f["kills_during_startup"],
        f["writes_cut_by_kills"],
        f["acknowledged"],
        f["lost"],
        f["unacknowledged"],
        f["unacknowledged_visible"],
        f["half_visible"],
        "clean" if f["verify_clean"] else "NOT clean",
        f"{ready['p50']} / {ready['max']}",
    )
