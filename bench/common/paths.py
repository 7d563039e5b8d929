"""Where the benchmark commands read and write: one place, so a moved folder
is a one-line change and every command agrees on it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "bench"
RESULTS_DIR = BENCH_DIR / "results"
CACHE_DIR = BENCH_DIR / "cache"  # git-ignored: speed-only models, peer embeddings
DATASETS_DIR = BENCH_DIR / "datasets"  # data sets kept in the repository
BENCHMARKS_MD = ROOT / "docs" / "benchmarks.md"
EVAL_DATA = ROOT / ".data" / "eval"  # the indexes the eval and speed commands share
# The SciFact index those commands share holds fp32 document vectors, the
# reference bench.eval.scifact states and checks against the encoders the
# index records. An Indexer records its encoder as soon as it starts, so every
# stack opened on that folder sends this, whatever `auto` would pick here.
SCIFACT_INDEX_ENV = {"RAG_EMBEDDING_DOCUMENT_PRECISION": "fp32"}
SCRATCH_DIR = RESULTS_DIR / "tmp"  # git-ignored: logs, smoke and train-split runs
SHARED_DATASETS = ROOT.parent / "shared" / "datasets"
BENCH_VENV_PYTHON = ROOT / ".venv-bench" / "bin" / "python"


def add_output_arguments(parser: argparse.ArgumentParser, results_file: str) -> None:
    """`--out` (the result file) and `--docs` (the page it regenerates)."""
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS_DIR / results_file,
        help=f"result file (default: bench/results/{results_file})",
    )
    parser.add_argument(
        "--docs",
        "--docs-path",
        dest="docs_path",
        type=Path,
        default=None,
        help="page to regenerate (default: docs/benchmarks.md when --out is the default, "
        "else benchmarks.md next to --out, so a trial run leaves the real page alone)",
    )


def parse_with_outputs(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, results_file: str
) -> argparse.Namespace:
    """`argv` parsed by `parser` with `--out` and `--docs` added, the page resolved."""
    add_output_arguments(parser, results_file)
    opts = parser.parse_args(argv)
    resolve_page(opts, results_file)
    return opts


def resolve_page(opts: argparse.Namespace, results_file: str) -> None:
    """Fill `opts.docs_path` when `--docs` was not given (see `page_for`)."""
    if opts.docs_path is None:
        opts.docs_path = page_for(opts.out, RESULTS_DIR / results_file)


def page_for(out: Path, default_out: Path) -> Path:
    """The page a result file regenerates: docs/benchmarks.md for the default
    result file, else benchmarks.md next to `out`, so a trial run leaves the
    real page alone."""
    if out.resolve() == default_out.resolve():
        return BENCHMARKS_MD
    return out.parent / "benchmarks.md"
