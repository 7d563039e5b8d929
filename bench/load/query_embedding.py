"""Query-embedding speed of the project's `Embedder`, per backend (torch /
ONNX Runtime) and with or without micro-batching of concurrent queries.

    python -m bench.load.query_embedding [--queries 200] [--threads 16] [--repeats 3]

Measured in this process, without gRPC or stores: the model-bound part of
Retrieve. Configurations are measured in turns (round robin, `--repeats`
rounds) so a neighbour's load spreads over all of them; the summary keeps each
configuration's median round. Prints a table; `--out` also writes the JSON.
ONNX exports go to `--cache-dir` (default under the data dir, never the repo).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import SHARED_DATASETS
from bench.common.record import latency_summary
from services.core.environment import default_data_dir
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from services.runtime.cpu import prefer_passive_waits

WARM_UP = 20
NO_MICRO_BATCHING = 1


@dataclass(frozen=True)
class Setup:
    backend: str
    max_batch: int

    @property
    def label(self) -> str:
        batching = "micro-batching" if self.max_batch > NO_MICRO_BATCHING else "one pass per query"
        return f"{self.backend}, {batching}"


def load_texts(path: Path, limit: int) -> list[str]:
    """The first `limit` texts of a BEIR JSONL file (title and text joined)."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:limit]]
    return [" ".join(filter(None, (r.get("title"), r["text"]))) for r in records]


def build(setup: Setup, cache_dir: Path, threads: int) -> Embedder:
    return Embedder(
        EmbedderConfig(
            backend=setup.backend,  # type: ignore[arg-type]
            onnx_cache_dir=cache_dir,
            threads=threads,
            query_cache_size=0,  # every call reaches the model
            query_max_batch=setup.max_batch,
        )
    )


def one_at_a_time(embedder: Embedder, queries: Sequence[str]) -> dict[str, Any]:
    """Per-query latency with no overlap: what one Retrieve alone pays."""
    for text in queries[:WARM_UP]:
        embedder.embed_query(text)
    times = []
    for text in queries:
        started = time.perf_counter()
        embedder.embed_query(text)
        times.append((time.perf_counter() - started) * 1000)
    return latency_summary(times)


def concurrent(embedder: Embedder, queries: Sequence[str], threads: int) -> dict[str, Any]:
    """`threads` callers sharing the queries, each sending its next query as
    soon as its last one returned (closed loop)."""
    before = embedder.query_stats()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(embedder.embed_query, queries[:threads]))  # threads started, model warm
        started = time.perf_counter()
        list(pool.map(embedder.embed_query, queries))
        seconds = time.perf_counter() - started
    after = embedder.query_stats()
    passes = after.forward_passes - before.forward_passes
    calls = after.queries - before.queries
    return {
        "queries_per_s": round(len(queries) / seconds, 1),
        "mean_batch": round(calls / passes, 2) if passes else 0.0,
        "largest_batch": after.largest_batch,
    }


def documents_per_s(embedder: Embedder, texts: Sequence[str]) -> float:
    embedder.embed_documents(list(texts[:8]))
    started = time.perf_counter()
    embedder.embed_documents(list(texts))
    return round(len(texts) / (time.perf_counter() - started), 2)


def round_robin(
    setups: Sequence[Setup], repeats: int, measure: Callable[[Setup], dict[str, Any]]
) -> dict[Setup, list[dict[str, Any]]]:
    runs: dict[Setup, list[dict[str, Any]]] = {setup: [] for setup in setups}
    for _ in range(repeats):
        for setup in setups:
            runs[setup].append(measure(setup))
    return runs


def median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    ordered = sorted(runs, key=lambda run: run[key])
    return ordered[len(ordered) // 2]


def run(opts: argparse.Namespace) -> dict[str, Any]:
    queries = load_texts(opts.dataset / "queries-test.jsonl", opts.queries)
    abstracts = load_texts(opts.dataset / "corpus.jsonl", opts.documents)
    setups = [Setup(b, m) for b in opts.backends for m in (NO_MICRO_BATCHING, opts.max_batch)]
    embedders = {setup: build(setup, opts.cache_dir, opts.onnx_threads) for setup in setups}
    singles = [s for s in setups if s.max_batch == opts.max_batch]
    alone = round_robin(singles, opts.repeats, lambda s: one_at_a_time(embedders[s], queries))
    loaded = round_robin(
        setups, opts.repeats, lambda s: concurrent(embedders[s], queries, opts.threads)
    )
    docs = round_robin(
        singles, 1, lambda s: {"docs_per_s": documents_per_s(embedders[s], abstracts)}
    )
    return {
        "queries": len(queries),
        "threads": opts.threads,
        "repeats": opts.repeats,
        "cpus": os.cpu_count(),
        "load_average_at_start": round(os.getloadavg()[0], 2),
        "one_at_a_time": {s.backend: median_run(alone[s], "p50_ms") for s in singles},
        "concurrent": {s.label: median_run(loaded[s], "queries_per_s") for s in setups},
        "concurrent_runs": {s.label: [r["queries_per_s"] for r in loaded[s]] for s in setups},
        "documents": {s.backend: docs[s][0]["docs_per_s"] for s in singles},
        "documents_measured": len(abstracts),
    }


def print_table(result: dict[str, Any]) -> None:
    print(f"one query at a time ({result['queries']} SciFact test queries, warm):")
    for backend, summary in result["one_at_a_time"].items():
        print(f"  {backend:6} p50 {summary['p50_ms']:6.2f} ms  p95 {summary['p95_ms']:6.2f} ms")
    print(f"{result['threads']} threads calling embed_query (median of {result['repeats']}):")
    for label, summary in result["concurrent"].items():
        runs = result["concurrent_runs"][label]
        print(f"  {label:32} {summary['queries_per_s']:7.1f} queries/s  runs {runs}")
    print(f"documents ({result['documents_measured']} SciFact abstracts, one call):")
    for backend, rate in result["documents"].items():
        print(f"  {backend:6} {rate:6.2f} docs/s")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--documents", type=int, default=64)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--backends", nargs="+", default=["torch", "onnx"], choices=["torch", "onnx"])
    p.add_argument("--onnx-threads", type=int, default=0, help="0: one per CPU")
    p.add_argument("--cache-dir", type=Path, default=default_data_dir() / "models")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    prefer_passive_waits()  # before torch is imported, as the services do
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    opts = parse_args(argv)
    result = run(opts)
    print_table(result)
    if opts.out:
        opts.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
