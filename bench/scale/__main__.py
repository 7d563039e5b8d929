"""Scale benchmark: embedded indexes of 10k, 100k and 1M chunks on this machine.

    python -m bench.scale [--sizes 10000 100000 1000000] [--requests 300] [--keep]

For each size: a synthetic corpus made of real SciFact chunks and Chinese
pages (bench.scale.corpus says exactly how) is written into a fresh embedded
index the way the Indexer writes (store writes timed; embedding skipped, the
vectors are synthesised); then the real stack process serves it and
`Retrieve` is loaded at concurrency 1 and 16 without rerank, without and
with a scope filter selecting ~1% of the corpus; then the vector channel's
HNSW recall@10 is measured against exact search. Results go to
bench/results/scale.json, the plot to bench/results/scale.png and the
section to docs/benchmarks.md. Indexes are deleted after measuring unless
`--keep` (they live in .data/scale/). `--writer-memory-cap MIB` writes and
builds each index inside a hard memory limit (bench.common.memory_cap; `make
bench-scale` uses 4096), so the record says whether a bulk load fits a
machine with that much memory, not only how much it took on this one.
`--probe-during-load RUNS` times the vector search a Retrieve makes every RUNS
runs of the load, next to the points not yet indexed (bench.scale.load_probe).
`--stack-memory-cap MIB` serves each index a second time with the stack inside a
hard memory limit (`make bench-scale`: 4096): whether it serves within that much
memory, and how fast, where the first serving says how much it takes unlimited.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench.common.memory_cap import ChildMemoryCap, MemoryCap, MemoryCapUnavailable
from bench.common.paths import RESULTS_DIR, ROOT, SCRATCH_DIR, page_for
from bench.common.record import run_record
from bench.reports.page import publish
from bench.reports.scale import PLOT_FILE, scale_plot
from bench.scale.build import build_index, disk_bytes
from bench.scale.corpus import CorpusSpec, SyntheticCorpus
from bench.scale.load_probe import LoadProbe
from bench.scale.measure import (
    SCALE_MODEL,
    hnsw_recall,
    measure_capped_serving,
    measure_serving,
)
from bench.scale.source import SourceCorpus, load_source
from services.storage.base import SearchEf

SIZES = (10_000, 100_000, 1_000_000)
RESULTS_FILE = RESULTS_DIR / "scale.json"
INDEX_ROOT = ROOT / ".data" / "scale"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="corpus sizes in chunks"
    )
    p.add_argument(
        "--requests", type=int, default=300, help="Retrieves per run at concurrency 1 (x2 at 16)"
    )
    p.add_argument("--seed", type=int, default=7, help="seed of the synthetic corpus")
    p.add_argument(
        "--source-docs",
        type=int,
        default=0,
        help="build from the first N SciFact documents only (smoke runs; 0: all)",
    )
    p.add_argument(
        "--recall-ef",
        type=int,
        nargs="*",
        default=[],
        help="also measure recall@10 at these hnsw_ef (the default is the store's own)",
    )
    p.add_argument(
        "--writer-memory-cap",
        type=int,
        default=0,
        metavar="MIB",
        help="write and build each index inside a memory cgroup limited to MIB (root; 0: none)",
    )
    p.add_argument(
        "--optimize-apart",
        action="store_true",
        help="build HNSW as the Indexer does by default: in a child process, on a shard copy",
    )
    p.add_argument(
        "--optimize-each-run",
        action="store_true",
        help="ask the optimizer after every run of documents, as the Indexer does (default: once)",
    )
    p.add_argument(
        "--probe-during-load",
        type=int,
        default=0,
        metavar="RUNS",
        help="time vector searches every RUNS runs of the load and after it settles (0: never)",
    )
    p.add_argument(
        "--stack-memory-cap",
        type=int,
        default=0,
        metavar="MIB",
        help="serve each index again with the stack inside a memory cgroup of MIB (root; 0: not)",
    )
    p.add_argument("--keep", action="store_true", help="keep the built indexes in .data/scale/")
    p.add_argument("--out", type=Path, default=RESULTS_FILE, help="result file")
    p.add_argument("--no-report", action="store_true", help="do not rewrite docs/benchmarks.md")
    return p


def measure_size(
    source: SourceCorpus, size: int, args: argparse.Namespace, log_dir: Path
) -> dict[str, Any]:
    corpus = SyntheticCorpus(source, CorpusSpec(chunks=size, seed=args.seed))
    data_dir = INDEX_ROOT / f"chunks-{size}"
    shutil.rmtree(data_dir, ignore_errors=True)
    print(f"{size} chunks: writing into {data_dir}", flush=True)
    probe = LoadProbe(source.query_vectors, corpus.filter_scope, args.probe_during_load)
    started = time.perf_counter()
    build = build_index(
        corpus,
        data_dir,
        memory_cap_mib=args.writer_memory_cap or None,
        optimize_apart=args.optimize_apart,
        optimize_each_run=args.optimize_each_run,
        probe=probe if args.probe_during_load else None,
    )
    write_s = time.perf_counter() - started
    # The writing process's peak so far (sizes run smallest first, so it is
    # this size's): what an Indexer needs while it writes and builds HNSW.
    writer_peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queries = list(zip(source.query_ids, source.query_texts, strict=True))
    try:
        serving = measure_serving(data_dir, corpus.filter_scope, queries, log_dir, args.requests)
        capped = (
            measure_capped_serving(
                data_dir,
                corpus.filter_scope,
                queries,
                log_dir,
                args.requests,
                args.stack_memory_cap,
            )
            if args.stack_memory_cap
            else None
        )
        recall = hnsw_recall(
            data_dir / "vectors", source.query_vectors, build.generation, corpus.filter_scope
        )
        recall_by_ef = {
            ef: hnsw_recall(
                data_dir / "vectors",
                source.query_vectors,
                build.generation,
                corpus.filter_scope,
                search_ef=SearchEf(ef, growth=0),
            )
            for ef in args.recall_ef
        }
        disk = disk_bytes(data_dir)
    finally:
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "chunks": build.chunks,
        "documents": build.documents,
        "corpus": corpus.describe(),
        "filter_share": round(build.scopes[corpus.filter_scope] / max(build.chunks, 1), 5),
        "locale_shares": {k: round(v / build.chunks, 4) for k, v in sorted(build.locales.items())},
        "largest_scope_share": round(max(build.scopes.values()) / max(build.chunks, 1), 4),
        "write_seconds": {k: round(v, 1) for k, v in build.seconds.items()},
        "write_total_s": round(write_s, 1),
        "writer_peak_rss_mib": round(writer_peak_mib),
        "writer_peak_rss_mib_by_phase": build.peak_rss_mib,
        "writer_peak_parts_mib_by_phase": build.peak_parts_mib,
        "writer_memory_cap": build.memory_cap,
        "optimize_apart": args.optimize_apart,
        "optimize_each_run": args.optimize_each_run,
        "optimizations": build.optimizations,
        "optimizer_child_peak_rss_mib": build.optimizer_child_peak_rss_mib,
        "search_during_load": probe.record(),
        "disk_bytes": disk,
        "recall_at_10": recall,
        "recall_at_10_by_ef": recall_by_ef,
        **serving,
        "capped_serving": capped,
    }


def check_memory_caps(writer_mib: int, stack_mib: int) -> None:
    """Fail before building anything when a limit cannot be applied."""
    for flag, limit_mib, cap in (
        ("--writer-memory-cap", writer_mib, MemoryCap),
        ("--stack-memory-cap", stack_mib, ChildMemoryCap),
    ):
        if not limit_mib:
            continue
        try:
            with cap(limit_mib):
                pass
        except (MemoryCapUnavailable, ValueError) as exc:
            raise SystemExit(
                f"{flag} {limit_mib}: {exc} (a memory cgroup needs root; {flag} 0: no limit)"
            ) from exc


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    check_memory_caps(args.writer_memory_cap, args.stack_memory_cap)
    record = run_record(["-m", "bench.scale", *(argv if argv is not None else sys.argv[1:])])
    source = load_source(SCALE_MODEL, args.source_docs)
    log_dir = SCRATCH_DIR / "logs" / "scale"
    started = time.perf_counter()
    sizes = [measure_size(source, size, args, log_dir) for size in sorted(args.sizes)]
    result = {**record, "total_s": round(time.perf_counter() - started, 1), "sizes": sizes}
    scale_plot(result, args.out.parent / PLOT_FILE)  # first: the page links it
    docs_path = None if args.no_report else page_for(args.out, RESULTS_FILE)
    publish(result, args.out, docs_path, RESULTS_FILE.name)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
