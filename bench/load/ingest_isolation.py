"""Retrieve while the Indexer ingests, in the embedded stack (issue 15, item 5).

`python -m services.stack` runs the Indexer and the Retriever in one process
on one Embedder and the same store handles, so an ingest competes with live
queries for the model and the two cores. This phase measures what users see:

1. A fresh stack opens a copy of the speed index (SciFact, scope `eval`), so
   the ingest never writes into the index other runs reuse.
2. Idle: a few paced clients (bench.load.paced_load) send SciFact test claims
   for `--idle-seconds`, query cache off, no reranking.
3. During ingest: the same clients, while the operator CLI (its own process,
   `python -m services.operator.cli ingest`) sends SciFact again as new
   documents (ids prefixed) into a scope of their own, so every chunk is
   chunked, embedded and written; it ends when the CLI exits.

Per phase: p50/p95/p99, answers with a non-empty `degraded` list (component
and reason), failed calls, and the server's own per-channel timings.
`python -m bench.load.speed` runs this as its last phase; alone:

    python -m bench.load.ingest_isolation          # bench/results/ingest_isolation.json
    python -m bench.load.ingest_isolation --smoke --out /tmp/x
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.indexing import ingest_beir
from bench.common.paths import ROOT, SCIFACT_INDEX_ENV
from bench.common.processes import Stack
from bench.common.record import latency_summary, run_record
from bench.eval.scifact_options import SCOPE
from bench.load.paced_load import Pacing, Sample, run_paced, stop_after
from bench.load.speed_options import BenchOptions, parse_args
from bench.load.stall_windows import optimize_windows, stall_summary
from bench.reports.targets import isolation_targets

CLIENTS = 4
# Per client, start to start: 40 requests/s offered in all, ~40% of what four
# clients get flat out here, so the machine keeps time for the ingest.
INTERVAL_S = 0.1
WARM_UP_S = 2.0
INGEST_SCOPE = "ingest-isolation"
ID_PREFIX = "ingest-"
STAGES = ("vector", "lexical")
SLOWEST = 8


def measure_ingest_isolation(opts: BenchOptions, queries: Sequence[str]) -> dict[str, Any]:
    pacing = Pacing(CLIENTS, INTERVAL_S)
    logs = opts.log_dir / "ingest-isolation"
    logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ingest-isolation-") as tmp:
        corpus = renamed_corpus(opts.dataset.corpus, Path(tmp) / "ingest.jsonl", opts.ingest_docs)
        stack = open_index_copy(opts, Path(tmp) / "data", logs)
        try:
            addr = stack.retriever_addr
            run_paced(addr, queries, SCOPE, pacing, stop_after(WARM_UP_S))
            started = time.monotonic()
            idle = run_paced(addr, queries, SCOPE, pacing, stop_after(opts.idle_seconds))
            idle_s = time.monotonic() - started
            ingest = CliIngest(stack.indexer_addr, corpus, logs / "ingest.log")
            during = run_paced(addr, queries, SCOPE, pacing, ingest.finished)
            report = ingest.finish()
        finally:
            stack.stop()
    return {
        "pacing": {"clients": pacing.clients, "interval_ms": round(pacing.interval_s * 1000)},
        "queries": len(queries),
        "idle": summarise(idle, idle_s),
        "during_ingest": summarise(during, report["seconds"]),
        "ingest": report,
        "vector_optimize": stall_summary(during, optimize_windows(logs / "stack.log")),
    }


def renamed_corpus(source: Path, target: Path, limit: int) -> Path:
    """The corpus again as new documents (same texts, ids prefixed), so the
    Indexer chunks, embeds and writes every one instead of finding it unchanged."""
    written = 0
    with source.open(encoding="utf-8") as src, target.open("w", encoding="utf-8") as out:
        for line in src:
            if not line.strip() or (limit and written >= limit):
                continue
            doc = json.loads(line)
            doc["_id"] = ID_PREFIX + str(doc["_id"])
            out.write(json.dumps(doc) + "\n")
            written += 1
    return target


def open_index_copy(opts: BenchOptions, target: Path, logs: Path) -> Stack:
    """A stack on a copy of the speed index: the index is brought up to date
    first (built when missing, reused when every document is unchanged), then
    copied, so the measured ingest never writes into the index others reuse."""
    source = Stack.start(opts.data_dir, logs, SCIFACT_INDEX_ENV)
    try:
        ingest_beir(source.indexer_addr, opts.dataset.corpus, SCOPE, title_as_heading=True)
    finally:
        source.stop()
    shutil.copytree(opts.data_dir, target)
    return Stack.start(target, logs, {"RAG_QUERY_CACHE_SIZE": "0"})


class CliIngest:
    """`python -m services.operator.cli ingest` in its own process, as an
    operator runs it: its client work (loading, protos) stays off the
    benchmark's own interpreter, whose load clients it would otherwise slow."""

    def __init__(self, indexer_addr: str, corpus: Path, log_path: Path) -> None:
        argv = ["--addr", indexer_addr, "ingest", str(corpus), "--scope", INGEST_SCOPE]
        argv += ["--format", "beir", "--title-as-heading", "--quiet"]
        self.log_path = log_path
        self._log = log_path.open("w")
        self.started = time.monotonic()
        self.started_at = time.time()
        self.ended: float | None = None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.operator.cli", *argv],
            cwd=ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def finished(self) -> bool:
        if self.ended is None and self.proc.poll() is not None:
            self.ended = time.monotonic()
        return self.ended is not None

    def finish(self) -> dict[str, Any]:
        self.proc.wait()
        self.finished()
        self._log.close()
        output = self.log_path.read_text(errors="replace")
        if self.proc.returncode != 0:
            raise RuntimeError(f"ingest exited with {self.proc.returncode}:\n{output[-3000:]}")
        counts = done_counts(output)
        assert self.ended is not None
        seconds = round(self.ended - self.started, 2)
        chunks = counts.get("chunks_to_embed", 0)
        return {
            "scope": INGEST_SCOPE,
            "documents": counts.get("added", 0) + counts.get("changed", 0),
            "chunks": chunks,
            "seconds": seconds,
            "chunks_per_s": round(chunks / seconds, 2) if seconds else 0.0,
        }


def done_counts(output: str) -> dict[str, int]:
    """The CLI's closing line, `done: added=5183, ..., chunks_to_embed=12508, ...`."""
    for line in reversed(output.splitlines()):
        if line.startswith("done: "):
            pairs = (item.split("=", 1) for item in line[len("done: ") :].split(", "))
            return {key: int(value) for key, value in pairs}
    raise RuntimeError(f"no summary line in the ingest output:\n{output[-2000:]}")


def summarise(samples: Sequence[Sample], seconds: float) -> dict[str, Any]:
    answered = [s for s in samples if not s.error]
    degraded = [s for s in answered if s.degraded]
    reasons = Counter(reason for s in degraded for reason in s.degraded)
    stages = {
        stage: latency_summary([s.stages_ms[stage] for s in answered if stage in s.stages_ms])
        for stage in STAGES
    }
    return {
        "seconds": round(seconds, 2),
        "requests": len(samples),
        "requests_per_s": round(len(samples) / seconds, 2) if seconds else 0.0,
        "latency": latency_summary([s.latency_ms for s in answered]),
        "degraded": len(degraded),
        "degraded_reasons": dict(reasons.most_common(5)),
        "errors": dict(Counter(s.error for s in samples if s.error)),
        "server_stage_ms": stages,
        # When the slowest answers were sent (seconds into the phase), with the
        # server's own stage times: a slow answer whose server total is short
        # waited outside the pipeline (the process was paused).
        "slowest": [
            {
                "sent_s": round(s.sent_at - samples[0].sent_at, 2),
                "latency_ms": round(s.latency_ms, 1),
                "server_ms": {k: round(v, 1) for k, v in s.stages_ms.items()},
                "degraded": s.degraded,
            }
            for s in sorted(samples, key=lambda s: -s.latency_ms)[:SLOWEST]
        ],
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv, __doc__ or "", prog="python -m bench.load.ingest_isolation")
    record = run_record(["-m", "bench.load.ingest_isolation", *argv])
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    queries = list(opts.dataset.queries().values())
    result = {**record, **measure_ingest_isolation(opts, queries)}
    result["targets"] = isolation_targets(result)
    path = opts.out_dir / "ingest_isolation.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("idle", "during_ingest", "ingest")}, indent=2))
    print(json.dumps(result["targets"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
