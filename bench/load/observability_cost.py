"""What per-service metrics and tracing cost a search: Retrieve at concurrency
1, no reranking, on SciFact, through four configurations of the embedded
stack (`python -m services.stack`), each a fresh process on the same index:

1. `baseline`: the code before metrics and tracing (`--baseline-rev`, by
   default 2c3b655), checked out into a temporary detached `git worktree`
   and started from there with the same Python environment.
2. `metrics off`: this code, `RAG_METRICS_ENABLED=false`.
3. `metrics on, tracing off`: the metrics listeners on free ports; a thread
   of this process scrapes the Retriever's /metrics every 5 s (Prometheus
   defaults to 15-60 s) and the last scrape must count every Retrieve.
4. `metrics on, tracing on`: plus OTLP/HTTP export of every span
   (`OTEL_TRACES_SAMPLER=always_on`, the SDK's batch processor defaults) to
   a small sink in this process that accepts `POST /v1/traces` and counts
   the requests and bytes (the spans are decoded only after the run).

Rounds interleave the configurations against drift: each round runs every
configuration once (`--requests` measured after `--warmup` discarded ones),
and the order rotates from round to round. Query cache off, so every
request embeds its query (as bench.load.speed measures).

Writes bench/results/observability_cost.json and regenerates docs/benchmarks.md.

    python -m bench.load.observability_cost
    python -m bench.load.observability_cost --smoke --out /tmp/x    # tiny index, 1 round
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.common.checkout import Checkout
from bench.common.indexing import index_stats, ingest_beir
from bench.common.paths import (
    BENCHMARKS_MD,
    EVAL_DATA,
    ROOT,
    SCIFACT_INDEX_ENV,
    SCRATCH_DIR,
    SHARED_DATASETS,
)
from bench.common.processes import Stack, free_ports
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import run_load
from bench.eval.dataset import BeirDataset, dataset_and_out_dir
from bench.eval.scifact_options import SCOPE
from bench.load.telemetry_sinks import OtlpSink, Scraper
from bench.reports.observability import RESULTS_FILE
from bench.reports.page import write_report
from bench.reports.targets import Target
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

BASELINE = "baseline"
METRICS_OFF = "metrics off"
METRICS_ON = "metrics on, tracing off"
TRACING_ON = "metrics on, tracing on"
DEFAULT_BASELINE_REV = "2c3b655"
TOP_K = 10
ISSUE = "the observability issue"
METRICS_P50 = Target(
    "Retrieve p50, concurrency 1, no rerank: metrics on, tracing off / the code before",
    1.05,
    "at_most",
    source=ISSUE,
)
# The batch span processor's SDK defaults (no OTEL_BSP_* is set).
BSP_DEFAULTS = {
    "OTEL_BSP_SCHEDULE_DELAY": "5000 ms",
    "OTEL_BSP_MAX_QUEUE_SIZE": 2048,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512,
}


@dataclass(frozen=True)
class Options:
    dataset: BeirDataset
    data_dir: Path
    out_dir: Path
    docs_path: Path
    log_dir: Path
    requests: int
    rounds: int
    warmup: int
    scrape_interval_s: float
    baseline_rev: str
    smoke: bool


def parse_args(argv: list[str]) -> Options:
    p = argparse.ArgumentParser(
        prog="python -m bench.load.observability_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    p.add_argument("--data-dir", type=Path, help="index folder (default: the eval index)")
    p.add_argument("--requests", type=int, default=300, help="measured per configuration, round")
    p.add_argument("--rounds", type=int, default=3, help="every configuration once per round")
    p.add_argument("--warmup", type=int, default=30, help="discarded requests per process")
    p.add_argument("--scrape-interval", type=float, default=5.0, help="seconds between scrapes")
    p.add_argument("--baseline-rev", default=DEFAULT_BASELINE_REV, help="the code before")
    p.add_argument("--smoke", action="store_true", help="tiny index, 16 requests, 1 round")
    p.add_argument("--out", "--out-dir", dest="out_dir", type=Path, help="default bench/results")
    p.add_argument("--docs", "--docs-path", dest="docs_path", type=Path)
    args = p.parse_args(argv)
    dataset, out_dir = dataset_and_out_dir(args.dataset, args.out_dir, args.smoke)
    return Options(
        dataset=dataset,
        # The index bench.eval.scifact and bench.load.speed use (same corpus, scope, options).
        data_dir=args.data_dir or (out_dir / "data" if args.smoke else EVAL_DATA) / dataset.name,
        out_dir=out_dir,
        # A smoke run must not rewrite the real page.
        docs_path=args.docs_path or (out_dir / "benchmarks.md" if args.smoke else BENCHMARKS_MD),
        log_dir=(out_dir if args.smoke else SCRATCH_DIR) / "logs" / "observability_cost",
        requests=16 if args.smoke else args.requests,
        rounds=1 if args.smoke else args.rounds,
        warmup=3 if args.smoke else args.warmup,
        scrape_interval_s=args.scrape_interval,
        baseline_rev=args.baseline_rev,
        smoke=args.smoke,
    )


# ------------------------------------------------------------ the code before


def start_stack(data_dir: Path, log_path: Path, env: Mapping[str, str], cwd: Path) -> Stack:
    """`python -m services.stack` from `cwd` (this tree or the baseline's worktree)."""
    return Stack.start(data_dir, log_path.parent, env, cwd=cwd, log_name=log_path.name)


# ------------------------------------------------------------ configurations


@dataclass(frozen=True)
class Configuration:
    name: str
    description: str
    metrics: bool = False
    tracing: bool = False
    baseline: bool = False

    def env(self, sink: OtlpSink) -> dict[str, str]:
        """This configuration's settings (ports fresh for every start)."""
        env = {"RAG_QUERY_CACHE_SIZE": "0"}
        if self.baseline:
            return env
        if not self.metrics:
            return {**env, "RAG_METRICS_ENABLED": "false"}
        indexer_metrics, retriever_metrics = free_ports(2)
        env |= {
            "RAG_METRICS_ENABLED": "true",
            "RAG_METRICS_HOST": "127.0.0.1",
            "RAG_INDEXER_METRICS_PORT": str(indexer_metrics),
            "RAG_RETRIEVER_METRICS_PORT": str(retriever_metrics),
        }
        if self.tracing:
            env |= {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
                "OTEL_TRACES_SAMPLER": "always_on",
            }
        return env


CONFIGURATIONS = (
    Configuration(BASELINE, "the code before metrics and tracing", baseline=True),
    Configuration(METRICS_OFF, "RAG_METRICS_ENABLED=false"),
    Configuration(METRICS_ON, "metrics listeners on, /metrics scraped every 5 s", metrics=True),
    Configuration(
        TRACING_ON,
        "plus every span exported over OTLP/HTTP (always_on sampler)",
        metrics=True,
        tracing=True,
    ),
)


@dataclass
class Run:
    """One configuration in one round."""

    configuration: str
    round: int
    position: int
    latencies_ms: list[float]
    errors: dict[str, int]
    cpu_s: float
    requests: int
    scrape: dict[str, Any] | None = None
    sink: dict[str, Any] | None = None

    def row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "configuration": self.configuration,
            "round": self.round,
            "position": self.position,
            "latency": latency_summary(self.latencies_ms),
            "errors": self.errors,
            "cpu_ms_per_request": round(self.cpu_s * 1000 / max(self.requests, 1), 2),
        }
        if self.scrape is not None:
            row["scrape"] = self.scrape
        if self.sink is not None:
            row["sink"] = self.sink
        return row


def request(text: str) -> pb.RetrieveRequest:
    """bench.load.speed's request without reranking (top_k 10, the eval scope)."""
    return pb.RetrieveRequest(
        query=text, top_k=TOP_K, filter=pb.ScopeFilter(scope_id=SCOPE), disable_rerank=True
    )


def measure_once(
    config: Configuration,
    opts: Options,
    checkout: Checkout,
    sink: OtlpSink,
    batches: tuple[list[tuple[str, str]], list[tuple[str, str]]],
    where: tuple[int, int],
) -> Run:
    round_, position = where
    warm, batch = batches
    env = config.env(sink)
    cwd = ROOT
    if config.baseline:
        assert checkout.path is not None
        cwd, env = checkout.path, checkout.env(env)
    slug = config.name.replace(", ", "-").replace(" ", "-")
    sink.take()  # from here on, what the sink receives is this process's
    log_path = opts.log_dir / f"round{round_}-{slug}.log"
    stack = start_stack(opts.data_dir, log_path, {**SCIFACT_INDEX_ENV, **env}, cwd)
    scraper = None
    try:
        run_load(stack.retriever_addr, warm, request)
        if config.metrics:
            url = f"http://127.0.0.1:{env['RAG_RETRIEVER_METRICS_PORT']}/metrics"
            scraper = Scraper(url, opts.scrape_interval_s).start()
        process = psutil.Process(stack.process.pid)
        before = _cpu(process)
        run = run_load(stack.retriever_addr, batch, request)
        cpu_s = _cpu(process) - before
        scrape = scraper.finish(len(warm) + len(batch)) if scraper else None
    finally:
        if scraper is not None:
            scraper.stop()
        stack.stop()  # graceful: the span processor flushes what it holds
    traced = None
    if config.tracing:
        traced = sink.take()
        traced["expected_retrieve_spans"] = len(warm) + len(batch)
        traced["every_retrieve_traced"] = traced["retrieve_spans"] == len(warm) + len(batch)
    return Run(
        config.name,
        round_,
        position,
        run.latencies_ms,
        run.errors,
        cpu_s,
        len(batch),
        scrape=scrape,
        sink=traced,
    )


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def measure(
    opts: Options, checkout: Checkout, sink: OtlpSink, queries: list[tuple[str, str]]
) -> list[Run]:
    configs = [c for c in CONFIGURATIONS if not (c.baseline and checkout.path is None)]
    batch = [queries[i % len(queries)] for i in range(opts.requests)]
    warm = [queries[(opts.requests + i) % len(queries)] for i in range(opts.warmup)]
    runs: list[Run] = []
    for round_ in range(opts.rounds):
        shift = round_ % len(configs)
        order = configs[shift:] + configs[:shift]
        for position, config in enumerate(order):
            if config not in configs:  # the baseline would not start
                continue
            try:
                run = measure_once(config, opts, checkout, sink, (warm, batch), (round_, position))
            except RuntimeError as exc:
                if not config.baseline:
                    raise
                checkout.reason = f"the baseline stack did not start: {str(exc)[-1500:]}"
                configs.remove(config)
                runs = [r for r in runs if r.configuration != BASELINE]
                continue
            runs.append(run)
            print(
                f"round {round_ + 1}/{opts.rounds} {config.name}: "
                f"{latency_summary(run.latencies_ms)} cpu {run.row()['cpu_ms_per_request']} ms/req",
                flush=True,
            )
    return runs


# --------------------------------------------------------------- the summary


def summarise(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for config in CONFIGURATIONS:
        mine = [r for r in runs if r.configuration == config.name]
        if not mine:
            continue
        latencies = [ms for r in mine for ms in r.latencies_ms]
        errors: Counter[str] = Counter()
        for r in mine:
            errors.update(r.errors)
        requests = sum(r.requests for r in mine)
        row: dict[str, Any] = {
            "name": config.name,
            "description": config.description,
            "latency": latency_summary(latencies),
            "round_p50_ms": [latency_summary(r.latencies_ms)["p50_ms"] for r in mine],
            "cpu_ms_per_request": round(sum(r.cpu_s for r in mine) * 1000 / max(requests, 1), 2),
            "errors": dict(errors),
        }
        if config.metrics:
            scrapes = [r.scrape for r in mine if r.scrape is not None]
            row["metrics_counted_every_request"] = all(s["all_counted"] for s in scrapes)
        if config.tracing:
            row["sink"] = _sum_sinks([r.sink for r in mine if r.sink is not None])
        rows.append(row)
    by_name = {row["name"]: row["latency"]["p50_ms"] for row in rows}
    for row in rows:
        for key, reference in (("p50_vs_baseline", BASELINE), ("p50_vs_metrics_off", METRICS_OFF)):
            base = by_name.get(reference)
            row[key] = round(row["latency"]["p50_ms"] / base, 3) if base else None
    return rows


def _sum_sinks(sinks: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("export_requests", "bytes", "spans", "traces", "retrieve_spans")
    total: dict[str, Any] = dict.fromkeys(keys, 0)
    names: Counter[str] = Counter()
    for sink in sinks:
        for key in keys:
            total[key] += sink[key]
        names.update(sink["spans_by_name"])
    every = all(sink["every_retrieve_traced"] for sink in sinks)
    return {**total, "every_retrieve_traced": every, "spans_by_name": dict(names.most_common(12))}


def assess(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_name = {row["name"]: row for row in rows}
    metrics_on = by_name.get(METRICS_ON)
    if metrics_on is None:
        return [METRICS_P50.assess(None)]
    if BASELINE in by_name:
        ratio, against = metrics_on["p50_vs_baseline"], BASELINE
    else:
        ratio, against = metrics_on["p50_vs_metrics_off"], METRICS_OFF
    p50, base = metrics_on["latency"]["p50_ms"], by_name[against]["latency"]["p50_ms"]
    note = f"{p50} ms vs {base} ms ({against}): {(ratio - 1) * 100:+.1f}%"
    if against != BASELINE:
        note += "; the baseline revision was not measured"
    return [METRICS_P50.assess(ratio, note)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv)
    record = run_record(["-m", "bench.load.observability_cost", *argv])
    # Only the configurations' own settings trace: none inherited from this shell.
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    queries = list(opts.dataset.queries().items())
    index = build_index(opts)
    checkout = Checkout(opts.baseline_rev).open()
    sink = OtlpSink().start()
    try:
        runs = measure(opts, checkout, sink, queries)
    finally:
        sink.stop()
        checkout.close()
    rows = summarise(runs)
    result: dict[str, Any] = {
        "dataset": opts.dataset.name,
        **record,
        "index": index,
        "request": {"top_k": TOP_K, "scope_id": SCOPE, "disable_rerank": True, "concurrency": 1},
        "rounds": opts.rounds,
        "requests_per_round": opts.requests,
        "warmup_per_process": opts.warmup,
        "scrape_interval_s": opts.scrape_interval_s,
        "batch_span_processor": BSP_DEFAULTS,
        "baseline": checkout.describe(),
        "configurations": rows,
        "runs": [run.row() for run in runs],
        "targets": assess(rows),
    }
    path = opts.out_dir / RESULTS_FILE
    path.write_text(json.dumps(result, indent=2) + "\n")
    write_report(opts.out_dir, opts.docs_path)
    print(json.dumps(result["targets"], indent=2))
    print(f"wrote {path}")
    return 0


def build_index(opts: Options) -> dict[str, Any]:
    """The dataset into `opts.data_dir` through this code's Indexer (reused
    when it already holds exactly this corpus)."""
    logs = opts.log_dir / "index"
    stack = Stack.start(opts.data_dir, logs, {**SCIFACT_INDEX_ENV, "RAG_METRICS_ENABLED": "false"})
    try:
        ingest = ingest_beir(stack.indexer_addr, opts.dataset.corpus, SCOPE, title_as_heading=True)
        stats = index_stats(stack.indexer_addr)
    finally:
        stack.stop()
    return {
        "data_dir": str(opts.data_dir),
        "documents": int(stats["documents"]),
        "chunks": int(stats["chunks"]),
        "reused": ingest.reused,
        "ingest_seconds": ingest.seconds,
    }


if __name__ == "__main__":
    sys.exit(main())
