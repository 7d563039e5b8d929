"""What the committed-generation filter costs a search (docs/indexing.md,
"Crash safety"): the same searches on the embedded stores with and without
`visible_generation`, interleaved so both see the same machine.

    python -m bench.load.visibility_filter [--chunks 20000] [--queries 400]

Synthetic rows (random unit vectors, words from a fixed vocabulary), a tenth
of them written by an uncommitted generation so the filter has rows to drop.
Writes bench/results/visibility_filter.json and regenerates docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.paths import ROOT
from bench.common.record import latency_summary, run_record
from bench.reports.page import write_report
from services.core.deadline import Deadline
from services.core.models import Chunk, ScopeFilter
from services.storage.embedded.stores import open_embedded_stores

RESULTS = ROOT / "bench" / "results"
DIM = 384
COMMITTED = 5


def synthetic_chunks(n: int, rng: random.Random) -> list[Chunk]:
    vocabulary = [f"w{i}" for i in range(5000)]
    return [
        Chunk(
            chunk_id=f"c{i:07d}",
            doc_id=f"d{i // 4}",
            position=i % 4,
            text=" ".join(rng.choices(vocabulary, k=60)),
            content_hash=f"h{i}",
            scope_id="bench",
            generation=COMMITTED + 1 if i % 10 == 0 else 1 + i % COMMITTED,
        )
        for i in range(n)
    ]


def unit_vectors(n: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


NEVER = Deadline.never()


def timed(search: Callable[..., Any], *args: Any) -> float:
    started = time.perf_counter()
    search(*args)
    return (time.perf_counter() - started) * 1000


def fill(vectors: Any, lexical: Any, chunks: list[Chunk]) -> None:
    for start in range(0, len(chunks), 1000):
        batch = chunks[start : start + 1000]
        vectors.upsert(batch, unit_vectors(len(batch), start).tolist(), NEVER)
        lexical.upsert(batch, NEVER)
    vectors.optimize()  # the HNSW index a real embedded index has


def measure(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    rng = random.Random(7)
    chunks = synthetic_chunks(args.chunks, rng)
    vectors, lexical = open_embedded_stores(data_dir, DIM)
    try:
        fill(vectors, lexical, chunks)
        queries = unit_vectors(args.queries, 99).tolist()
        texts = [" ".join(rng.choice(chunks).text.split()[:3]) for _ in queries]
        plain = ScopeFilter(scope_id="bench")
        filtered = ScopeFilter(scope_id="bench", visible_generation=COMMITTED)
        times: dict[str, list[float]] = defaultdict(list)
        for i, (vector, text) in enumerate(zip(queries, texts, strict=True)):
            # Alternate which goes first: the second search of a pair finds warm caches.
            order = [("", plain), ("_filtered", filtered)][:: 1 if i % 2 else -1]
            for suffix, scope in order:
                # No deadline: the store's own cost is what is measured.
                times[f"vector{suffix}"].append(timed(vectors.search, vector, 50, scope, NEVER))
                times[f"lexical{suffix}"].append(timed(lexical.search, text, 50, scope, NEVER))
        return {name: latency_summary(values) for name, values in times.items()}
    finally:
        vectors.close()
        lexical.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--smoke", action="store_true", help="300 chunks, 10 queries (tests)")
    parser.add_argument("--out", dest="out_dir", type=Path, default=RESULTS)
    parser.add_argument("--docs-path", type=Path, default=None, help="default: docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.smoke:
        args.chunks, args.queries = 300, 10
    # A smoke run must not rewrite the real page.
    default_docs = args.out_dir / "benchmarks.md" if args.smoke else ROOT / "docs" / "benchmarks.md"
    args.docs_path = args.docs_path or default_docs
    with tempfile.TemporaryDirectory() as tmp:
        latencies = measure(args, Path(tmp))
    result = {
        **run_record(["-m", "bench.load.visibility_filter", *(argv or sys.argv[1:])]),
        "chunks": args.chunks,
        "queries": args.queries,
        "uncommitted_share": 0.1,
        "latency": latencies,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "visibility_filter.json").write_text(json.dumps(result, indent=2) + "\n")
    write_report(args.out_dir, args.docs_path)
    print(json.dumps(latencies, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
