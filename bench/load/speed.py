"""`make bench`: speed of the real services on SciFact.

1. The model alone (no service running): one query embedding, the
   embedding-bound throughput, and the raw encoder on the chunk texts of the
   indexing sample.
2. Indexing: the sample through the Indexer of a fresh stack.
3. Retrieve at concurrency 1, 4 and 16, without and with reranking, on the
   index `make eval` built (reused; built here if missing), query cache off.
   The reranker serves its default model, the packaged cross-encoder
   (ms-marco-MiniLM-L-12-v2, int8 ONNX, `make install`), with the Retriever's
   fitted candidates and budget; `--smoke` runs a tiny random-weight one.
   Per level with reranking: the shares of answers whose reranking was full,
   partial, a timeout or another fallback (bench.load.rerank_outcomes).
4. Reranking under tight caller deadlines: does any answer arrive late?
5. Resident memory of each service process; a py-spy profile of Retrieve.
6. Retrieve while an ingest runs: idle vs during a SciFact ingest into the
   same embedded stack, paced clients (bench.load.ingest_isolation).

Writes bench/results/bench.json, bench/results/latency.png and regenerates
docs/benchmarks.md.

    python -m bench.load.speed
    python -m bench.load.speed --smoke --out /tmp/x      # tiny dataset, tiny reranker, seconds
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.runtime.cpu import prefer_passive_waits

# The model-alone measurements run here: same OpenMP policy as the services,
# set before anything imports torch.
prefer_passive_waits()

import psutil  # noqa: E402

from bench.common.indexing import index_stats, ingest_beir  # noqa: E402
from bench.common.paths import CACHE_DIR, SCIFACT_INDEX_ENV  # noqa: E402
from bench.common.processes import Reranker, Stack  # noqa: E402
from bench.common.record import latency_summary, run_record  # noqa: E402
from bench.common.retrieve_loop import LoadResult, run_load  # noqa: E402
from bench.eval.dataset import write_subset  # noqa: E402
from bench.eval.scifact_options import SCOPE  # noqa: E402  (bench.eval.scifact's scope: the index is shared)
from bench.load.ingest_isolation import measure_ingest_isolation  # noqa: E402
from bench.load.model_bound import (  # noqa: E402
    best_query_embedding,
    chunk_texts,
    load_embedder,
    query_embedding,
    raw_encoder,
)
from bench.load.profiling import Sampler  # noqa: E402
from bench.load.rerank_outcomes import outcome_shares  # noqa: E402
from bench.load.speed_options import BenchOptions, parse_args  # noqa: E402
from bench.reports.page import write_report  # noqa: E402
from bench.reports.plot import plot_latencies  # noqa: E402
from bench.reports.targets import isolation_targets, speed_targets  # noqa: E402
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb  # noqa: E402
from services.embedding.embedder import Embedder  # noqa: E402
from services.reranker.settings import DEFAULT_MODEL as DEFAULT_RERANK_MODEL  # noqa: E402
from tests.support.tiny_cross_encoder import TINY, build_random_cross_encoder  # noqa: E402

CONCURRENCY = (1, 4, 16)
MODES = {"no rerank": True, "rerank": False}  # mode -> disable_rerank


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv, __doc__ or "")
    record = run_record(["-m", "bench.load.speed", *argv])
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    queries = list(opts.dataset.queries().items())
    embedder = load_embedder()
    embedding = best_query_embedding(embedder, [q for _, q in queries], opts.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        sample = write_subset(
            opts.dataset, Path(tmp) / "sample", queries=0, filler_docs=opts.index_docs
        )
        indexing = measure_indexing(opts, embedder, sample / "corpus.jsonl", Path(tmp))
    result: dict[str, Any] = {
        "dataset": opts.dataset.name,
        **record,
        "request": {"top_k": 10, "scope_id": SCOPE},
        "embedding": embedding,
        "indexing": indexing,
        **measure_retrieve(opts, queries, embedder),
    }
    isolation = measure_ingest_isolation(opts, [q for _, q in queries])
    result["ingest_isolation"] = isolation
    result["targets"] = speed_targets(result) + isolation_targets(isolation)
    path = opts.out_dir / "bench.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    write_report(opts.out_dir, opts.docs_path)
    print(json.dumps(result["targets"], indent=2))
    print(f"wrote {path}")
    return 0


def measure_indexing(
    opts: BenchOptions, embedder: Embedder, corpus: Path, scratch: Path
) -> dict[str, Any]:
    """The raw encoder and the Indexer on the same documents, alternately,
    `repeats` times; the best of each is compared (the machine may be shared,
    and interference only ever slows a run down)."""
    documents, texts = chunk_texts(corpus, title_as_heading=True)
    runs: list[dict[str, Any]] = []
    for attempt in range(opts.repeats):
        raw = raw_encoder(embedder, documents, texts)
        stack = Stack.start(scratch / f"index-{attempt}", opts.log_dir / "indexing")
        try:
            report = ingest_beir(stack.indexer_addr, corpus, SCOPE, title_as_heading=True)
        finally:
            stack.stop()
        chunks = report.counts["chunks_to_embed"]
        runs.append(
            {
                "raw_encoder": raw,
                "documents": report.documents,
                "chunks": chunks,
                "seconds": report.seconds,
                "docs_per_s": round(report.documents / report.seconds, 2),
                "chunks_per_s": round(chunks / report.seconds, 2),
            }
        )
    best = max(runs, key=lambda run: run["chunks_per_s"])
    best_raw = max((run["raw_encoder"] for run in runs), key=lambda raw: raw["chunks_per_s"])
    share = best["chunks_per_s"] / best_raw["chunks_per_s"]
    return {**best, "raw_encoder": best_raw, "share": round(share, 3), "runs": runs}


def reranker_model(opts: BenchOptions) -> tuple[str, str]:
    """The Reranker's own default model; a tiny random-weight cross-encoder
    for `--smoke` (seconds to load; its scores are meaningless)."""
    if not opts.smoke:
        return DEFAULT_RERANK_MODEL, (
            f"the served default {DEFAULT_RERANK_MODEL} (int8 ONNX), with the Retriever's "
            "fitted rerank candidates and budget"
        )
    path = CACHE_DIR / "speed-only-cross-encoder-tiny"
    if not (path / "config.json").is_file():
        build_random_cross_encoder(path, TINY, seed=0)
    description = (
        f"speed-only model: a BERT cross-encoder of {TINY.num_layers} layers x "
        f"{TINY.hidden_size} wide with random weights, so its scores are meaningless"
    )
    return str(path), description


def measure_retrieve(
    opts: BenchOptions, queries: list[tuple[str, str]], embedder: Embedder
) -> dict[str, Any]:
    logs = opts.log_dir / "retrieve"
    model, description = reranker_model(opts)
    reranker = Reranker.start(model, logs)
    env = {**SCIFACT_INDEX_ENV, "RAG_QUERY_CACHE_SIZE": "0", "RAG_RERANKER_ADDR": reranker.addr}
    try:
        stack = Stack.start(opts.data_dir, logs, env)
    except BaseException:
        reranker.stop()
        raise
    try:
        ingest = ingest_beir(stack.indexer_addr, opts.dataset.corpus, SCOPE, title_as_heading=True)
        stats = index_stats(stack.indexer_addr)
        processes = {
            "stack": stack.process.pid,
            "reranker": reranker.process.pid,
            "load client": os.getpid(),
        }
        levels = load_levels(opts, stack.retriever_addr, queries, processes)
        # The machine's speed drifts when it is shared: the model alone again,
        # right after the Retrieve runs (the services are idle meanwhile).
        embedding_after = query_embedding(embedder, [q for _, q in queries])
        deadlines = deadline_check(opts, stack.retriever_addr, queries)
        profile = profile_retrieve(opts, stack, queries)
        memory = {
            "stack (Indexer + Retriever)": stack.process.memory(),
            "reranker": reranker.process.memory(),
        }
    finally:
        stack.stop()
        reranker.stop()
    plot = plot_latencies(
        [(f"{level.mode}, c={level.run.concurrency}", level.run.latencies_ms) for level in levels],
        opts.out_dir / "latency.png",
        f"Retrieve on {opts.dataset.name}: latency per request",
    )
    return {
        "index": {
            "documents": int(stats["documents"]),
            "chunks": int(stats["chunks"]),
            "reused": ingest.reused,
            "ingest_seconds": ingest.seconds,
        },
        "reranker": {
            "loaded": reranker.loaded,
            "reason": reranker.reason,
            "description": description,
        },
        "retrieve": [retrieve_row(level) for level in levels],
        "embedding_after_retrieve": embedding_after,
        "deadline_check": deadlines,
        "memory": memory,
        "profile": profile,
        "plot": plot.name,
    }


def request_factory(disable_rerank: bool) -> Any:
    def make(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text, filter=pb.ScopeFilter(scope_id=SCOPE), disable_rerank=disable_rerank
        )

    return make


@dataclass
class Level:
    """One (mode, concurrency) run and the CPU time each process spent per request."""

    mode: str
    run: LoadResult
    cpu_ms_per_request: dict[str, float]


def load_levels(
    opts: BenchOptions, addr: str, queries: list[tuple[str, str]], processes: dict[str, int]
) -> list[Level]:
    levels = []
    for mode, disable_rerank in MODES.items():
        count = opts.requests if disable_rerank else opts.rerank_requests
        make = request_factory(disable_rerank)
        for concurrency in CONCURRENCY:
            batch = _cycle(queries, count)
            run_load(addr, batch[: concurrency * 2], make, concurrency=concurrency)  # warm-up
            before = cpu_seconds(processes)
            run = run_load(addr, batch, make, concurrency=concurrency)
            spent = cpu_seconds(processes)
            per_request = {
                name: round((spent[name] - before[name]) * 1000 / max(len(batch), 1), 2)
                for name in spent
            }
            levels.append(Level(mode, run, per_request))
            print(f"{mode} c={concurrency}: {latency_summary(run.latencies_ms)} {per_request}")
    return levels


def cpu_seconds(processes: dict[str, int]) -> dict[str, float]:
    """User + system CPU seconds so far of each named process (pid)."""
    times = {name: psutil.Process(pid).cpu_times() for name, pid in processes.items()}
    return {name: t.user + t.system for name, t in times.items()}


def _cycle(queries: list[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    return [queries[i % len(queries)] for i in range(count)]


def retrieve_row(level: Level) -> dict[str, Any]:
    run = level.run
    row: dict[str, Any] = {
        "mode": level.mode,
        "concurrency": run.concurrency,
        "latency": latency_summary(run.latencies_ms),
        "throughput_rps": run.throughput_rps,
        "errors": run.errors,
        "cpu_ms_per_request": level.cpu_ms_per_request,
    }
    if level.mode == "rerank":
        row["rerank"] = rerank_outcomes(run)
    return row


def rerank_outcomes(run: LoadResult) -> dict[str, Any]:
    responses = [a.response for a in run.answers if a.response is not None]
    outcomes = [response.rerank for response in responses]
    count = max(len(outcomes), 1)
    reasons = Counter(o.reason.split(":")[0].split(";")[0] for o in outcomes if o.reason)
    return {
        "used": sum(o.used for o in outcomes),
        "fallback": sum(o.fallback for o in outcomes),
        "mean_candidates": sum(o.candidates for o in outcomes) / count,
        "mean_reranked": sum(o.reranked for o in outcomes) / count,
        "mean_rerank_ms": round(sum(o.latency_ms for o in outcomes) / count, 2),
        "reasons": dict(reasons.most_common(4)),
        # full / partial / timeout / other, as the gateway reads each answer
        "outcomes": outcome_shares(responses),
    }


def deadline_check(
    opts: BenchOptions, addr: str, queries: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Reranking on, one caller, deadlines shorter than the rerank budget."""
    checks = []
    make = request_factory(False)
    for deadline_ms in opts.deadlines_ms:
        run = run_load(
            addr, _cycle(queries, opts.rerank_requests // 2), make, timeout_s=deadline_ms / 1000
        )
        answered = [a for a in run.answers if a.response is not None]
        checks.append(
            {
                "deadline_ms": deadline_ms,
                "requests": len(run.answers),
                "ok": len(answered),
                "deadline_exceeded": run.errors.get("DEADLINE_EXCEEDED", 0),
                "other_errors": {k: v for k, v in run.errors.items() if k != "DEADLINE_EXCEEDED"},
                "late": sum(a.latency_ms > deadline_ms for a in answered),
                "latency": latency_summary([a.latency_ms for a in run.answers]),
                "reranked_mean": round(rerank_outcomes(run)["mean_reranked"], 2),
            }
        )
    return checks


def profile_retrieve(
    opts: BenchOptions, stack: Stack, queries: list[tuple[str, str]]
) -> dict[str, Any]:
    if opts.smoke:
        return {"not_measured": "smoke run"}
    if reason := Sampler.available():
        return {"not_measured": reason}
    make = request_factory(True)
    batch = _cycle(queries, opts.requests)
    sampler = Sampler(stack.process.pid, 20, opts.log_dir / "py-spy.txt")
    sampler.start()
    while sampler.proc is not None and sampler.proc.poll() is None:
        run_load(stack.retriever_addr, batch[:50], make)
    return sampler.finish()


if __name__ == "__main__":
    sys.exit(main())
