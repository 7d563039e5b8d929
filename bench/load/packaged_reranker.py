"""`python -m bench.load.packaged_reranker`: what the packaged cross-encoder
(ms-marco-MiniLM-L-12-v2, int8 ONNX) costs per call on this machine, by input
length and candidate count, to choose `RAG_RERANK_MAX_LENGTH` and
`RAG_RERANK_CANDIDATES`.

Every call goes through `CrossEncoderScorer.score` (tokenization, shared
batches, activation: the service's path). Rounds interleave the lengths and
sizes, so a load change on a shared machine hits them alike; compare the
ratios more than the absolute times. Passages are SciFact-like: `--chars`
characters of English prose. Writes bench/results/reranker_packaged.json.

    python -m bench.load.packaged_reranker [--rounds 5] [--lengths 128 192 256]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from bench.common.paths import RESULTS_DIR
from bench.common.record import latency_summary, run_record
from bench.load.reranker import QUERY, make_passages
from services.reranker.scorer import CrossEncoderScorer
from services.reranker.settings import DEFAULT_MODEL


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load.packaged_reranker", description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--lengths", type=int, nargs="+", default=[128, 192, 256])
    p.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20])
    p.add_argument("--chars", type=int, default=1200)
    p.add_argument("--out", default=str(RESULTS_DIR / "reranker_packaged.json"))
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    record = run_record(["-m", "bench.load.packaged_reranker", *(argv or sys.argv[1:])])
    scorers = {length: loaded(length) for length in args.lengths}
    passages = make_passages(max(args.sizes), args.chars, seed=7)
    latencies: dict[int, dict[int, list[float]]] = {
        length: {size: [] for size in args.sizes} for length in args.lengths
    }
    for round_no in range(args.rounds):
        for size in args.sizes:
            for length, scorer in scorers.items():
                started = time.perf_counter()
                scored = scorer.score(QUERY, passages[:size])
                latencies[length][size].append((time.perf_counter() - started) * 1000)
                assert scored.scored == size
        print(f"  round {round_no + 1}/{args.rounds}", file=sys.stderr)
    result: dict[str, Any] = {
        **record,
        "model": DEFAULT_MODEL,
        "passage_chars": args.chars,
        "load_average_1m": os.getloadavg()[0],
        "ms": {
            str(length): {str(size): latency_summary(values) for size, values in sizes.items()}
            for length, sizes in latencies.items()
        },
    }
    with open(args.out, "w") as out:
        out.write(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["ms"], indent=2))
    return 0


def loaded(max_length: int) -> CrossEncoderScorer:
    scorer = CrossEncoderScorer(DEFAULT_MODEL, backend="onnx-int8", max_length=max_length)
    scorer.load()
    scorer.warm_up()
    return scorer


if __name__ == "__main__":
    raise SystemExit(main())
