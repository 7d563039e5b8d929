"""The options of `python -m bench.load.speed`: which dataset, how many requests
per level, and where results, logs and the index go."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from bench.common.paths import BENCHMARKS_MD, EVAL_DATA, SCRATCH_DIR, SHARED_DATASETS
from bench.eval.dataset import BeirDataset, dataset_and_out_dir


@dataclass(frozen=True)
class BenchOptions:
    dataset: BeirDataset
    out_dir: Path
    docs_path: Path
    data_dir: Path
    index_docs: int
    requests: int  # per concurrency level without reranking
    rerank_requests: int
    deadlines_ms: tuple[int, ...]
    repeats: int  # model and indexing measurements: best of this many
    smoke: bool
    log_dir: Path
    # Retrieve while an ingest runs (bench.load.ingest_isolation)
    ingest_docs: int  # documents the ingest sends; 0: the whole corpus
    idle_seconds: float  # how long the idle figures are measured


def parse_args(
    argv: list[str], description: str, prog: str = "python -m bench.load.speed"
) -> BenchOptions:
    p = argparse.ArgumentParser(
        prog=prog,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    p.add_argument("--smoke", action="store_true", help="tiny dataset and reranker")
    p.add_argument("--out", type=Path, help="results folder (default bench/results)")
    p.add_argument("--docs", type=Path, help="Markdown report (default docs/benchmarks.md)")
    p.add_argument("--data-dir", type=Path, help="index folder (default: the eval index)")
    p.add_argument("--index-docs", type=int, default=400, help="documents in the indexing sample")
    p.add_argument("--repeats", type=int, default=3, help="best of N for model and indexing")
    p.add_argument("--requests", type=int, default=300, help="per level, without reranking")
    p.add_argument("--rerank-requests", type=int, default=120, help="per level, with reranking")
    p.add_argument(
        "--ingest-docs", type=int, default=0, help="Retrieve during an ingest of N docs (0: all)"
    )
    p.add_argument("--idle-seconds", type=float, default=60, help="Retrieve before that ingest")
    args = p.parse_args(argv)
    dataset, out_dir = dataset_and_out_dir(args.dataset, args.out, args.smoke)
    return BenchOptions(
        dataset=dataset,
        out_dir=out_dir,
        docs_path=args.docs or (out_dir / "benchmarks.md" if args.smoke else BENCHMARKS_MD),
        # The index bench.eval.scifact builds (same corpus, scope and loader options): reused.
        data_dir=args.data_dir or (out_dir / "data" if args.smoke else EVAL_DATA) / dataset.name,
        index_docs=10 if args.smoke else args.index_docs,
        requests=16 if args.smoke else args.requests,
        rerank_requests=16 if args.smoke else args.rerank_requests,
        deadlines_ms=(50, 100, 200),
        repeats=1 if args.smoke else args.repeats,
        smoke=args.smoke,
        log_dir=(out_dir if args.smoke else SCRATCH_DIR) / "logs" / "bench",
        ingest_docs=args.ingest_docs,
        idle_seconds=2 if args.smoke else args.idle_seconds,
    )
