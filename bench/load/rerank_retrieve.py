"""`python -m bench.load.rerank_retrieve`: Retrieve with the packaged
cross-encoder reranking, at concurrency 1 and 16, under a caller's deadline.

Starts the Reranker (its default model: the packaged ms-marco-MiniLM-L-12-v2,
int8 ONNX) and an embedded stack on the index `python -m bench.eval.third_party`
built (real third-party documentation; run that first), then sends the
third-party questions through `Retrieve` in a closed loop, once per
concurrency level and candidate count, with reranking on and a deadline on
every call. Recorded per run: latency (p50/p95/p99), throughput, the rerank
outcome shares as the gateway reads them (bench.load.rerank_outcomes), the
candidates sent and scored, errors by status, and answers that came back
after the caller's deadline. Writes bench/results/rerank_retrieve.json.

    python -m bench.load.rerank_retrieve
    python -m bench.load.rerank_retrieve --candidates 20 4 --deadline-ms 1000
    python -m bench.load.rerank_retrieve --model packaged:answerai-colbert-small-v1 \
        --candidates 10 --budget-ms 1500 --deadline-ms 3000

`--model` names the model both the Reranker and the Retriever are told of
(RAG_RERANK_MODEL), so the Retriever applies that model's fitted rule; its
results go to rerank_retrieve_<model>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.common.paths import EVAL_DATA, RESULTS_DIR, SCRATCH_DIR
from bench.common.processes import Reranker, Stack
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import LoadResult, run_load
from bench.eval.bilingual import index_dir
from bench.eval.third_party import SCOPE
from bench.eval.third_party_data import read_queries
from bench.load.rerank_outcomes import outcome_shares
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.reranker.settings import DEFAULT_MODEL

RESULTS_FILE = "rerank_retrieve.json"
QUERIES = Path(__file__).resolve().parents[1] / "datasets" / "third_party" / "queries.jsonl"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    record = run_record(["-m", "bench.load.rerank_retrieve", *argv])
    if not (args.index / "manifest.sqlite3").is_file():
        raise SystemExit(f"no index at {args.index}: run `python -m bench.eval.third_party` first")
    questions = [(q.id, q.text) for q in read_queries(QUERIES)]
    runs = [level for candidates in args.candidates for level in measure(args, candidates)]
    result = {**record, "index": str(args.index), "questions": len(questions), "runs": runs}
    slug = "" if args.model == DEFAULT_MODEL else "_" + args.model.removeprefix("packaged:")
    path = args.out / RESULTS_FILE.replace(".json", f"{slug}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    for run in runs:
        shown = ("candidates", "concurrency", "latency", "outcomes", "scored_mean", "late")
        print(json.dumps({k: run[k] for k in shown}))
    print(f"wrote {path}")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.load.rerank_retrieve", description=__doc__)
    p.add_argument("--index", type=Path, default=index_dir(EVAL_DATA, "third-party-300", {}))
    p.add_argument("--candidates", type=int, nargs="+", default=[20, 4])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    p.add_argument("--deadline-ms", type=float, default=1000.0, help="every call's deadline")
    p.add_argument("--rounds", type=int, default=2, help="passes over the questions per level")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    p.add_argument("--model", default=DEFAULT_MODEL, help="the reranking model (RAG_RERANK_MODEL)")
    p.add_argument("--budget-ms", type=int, default=0, help="RAG_RERANK_BUDGET_MS (0: default)")
    return p.parse_args(argv)


def measure(args: argparse.Namespace, candidates: int) -> list[dict[str, Any]]:
    """Every concurrency level with one candidate count, on a fresh stack."""
    logs = SCRATCH_DIR / "logs" / "rerank-retrieve"
    reranker = Reranker.start(args.model, logs, {"RAG_METRICS_ENABLED": "false"})
    if not reranker.loaded:
        reranker.stop()
        raise SystemExit(f"the Reranker did not load {args.model}: {reranker.reason}")
    env = {
        "RAG_RERANKER_ADDR": reranker.addr,
        "RAG_RERANK_MODEL": args.model,
        "RAG_RERANK_CANDIDATES": str(candidates),
        "RAG_METRICS_ENABLED": "false",
    }
    if args.budget_ms:
        env["RAG_RERANK_BUDGET_MS"] = str(args.budget_ms)
    stack = Stack.start(args.index, logs, env)
    try:
        questions = [(q.id, q.text) for q in read_queries(QUERIES)] * args.rounds
        run_load(stack.retriever_addr, questions[:4], _request)  # warm-up
        levels = []
        for concurrency in args.concurrency:
            timeout_s = args.deadline_ms / 1000
            load = run_load(
                stack.retriever_addr,
                questions,
                _request,
                concurrency=concurrency,
                timeout_s=timeout_s,
            )
            levels.append(summary(load, candidates, args.deadline_ms))
        return levels
    finally:
        stack.stop()
        reranker.stop()


def _request(text: str) -> pb.RetrieveRequest:
    return pb.RetrieveRequest(
        query=text, top_k=10, max_chunks_per_document=1, filter=pb.ScopeFilter(scope_id=SCOPE)
    )


def summary(load: LoadResult, candidates: int, deadline_ms: float) -> dict[str, Any]:
    answered = [a for a in load.answers if a.response is not None]
    responses = [a.response for a in answered if a.response is not None]
    sent = [response.rerank.candidates for response in responses]
    scored = [response.rerank.reranked for response in responses]
    return {
        "candidates": candidates,
        "concurrency": load.concurrency,
        "deadline_ms": deadline_ms,
        "latency": latency_summary(load.latencies_ms),
        "throughput_rps": load.throughput_rps,
        "outcomes": outcome_shares(responses),
        "sent_mean": round(sum(sent) / len(sent), 2) if sent else 0.0,
        "scored_mean": round(sum(scored) / len(scored), 2) if scored else 0.0,
        "errors": load.errors,
        "late": sum(1 for a in answered if a.latency_ms > deadline_ms),
    }


if __name__ == "__main__":
    sys.exit(main())
