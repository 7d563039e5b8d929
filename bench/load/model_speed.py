"""The speed cost of each packaged embedding model, side by side, through the
real services: one query embedding (the model alone), indexing chunks/s
through the Indexer of a fresh stack, `Retrieve` p50 at concurrency 1 and
requests/s at concurrency 16 (no rerank, query cache off) on that index, and
the stack's resident memory.

    python -m bench.load.model_speed                       # both packaged models
    python -m bench.load.model_speed --documents 100 --out /tmp/x.json   # quicker

Writes bench/results/model_speed.json and regenerates docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.indexing import index_stats, sync_documents
from bench.common.paths import BENCHMARKS_MD, RESULTS_DIR, SCRATCH_DIR, SHARED_DATASETS
from bench.common.processes import Stack
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import run_load
from bench.eval.dataset import BeirDataset
from bench.reports.model_speed import RESULTS_FILE
from bench.reports.page import publish
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.embedding.config import MULTILINGUAL_MODEL, PACKAGED_MODEL
from services.sources.loaders import load_beir_jsonl

MODELS = (PACKAGED_MODEL, MULTILINGUAL_MODEL)
SCOPE = "speed"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    record = run_record(["-m", "bench.load.model_speed", *(argv or sys.argv[1:])])
    dataset = BeirDataset(args.dataset, "test")
    documents = [d for d in load_beir_jsonl(dataset.corpus, scope_id=SCOPE, title_as_heading=True)]
    sample = [d for d in documents if hasattr(d, "doc_id")][: args.documents]
    queries = [(qid, text) for qid, text in list(dataset.queries().items())[: args.queries]]
    models = {model: measure(model, sample, queries, args) for model in args.models}
    result = {**record, "documents": len(sample), "queries": len(queries), "models": models}
    publish(result, args.out, None if args.no_docs else args.docs, RESULTS_FILE)
    for model, values in models.items():
        print(model, values)
    return 0


def measure(
    model: str, documents: list[Any], queries: list[tuple[str, str]], args: Any
) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="model-speed-", dir=SCRATCH_DIR))
    env = {
        "RAG_EMBEDDING_MODEL": model,
        "RAG_QUERY_CACHE_SIZE": "0",
        "RAG_METRICS_ENABLED": "false",
        "RAG_EMBEDDING_CACHE_DIR": str(args.model_cache),
    }
    stack = Stack.start(data_dir, SCRATCH_DIR / "logs" / "model_speed", env)
    try:
        started = time.perf_counter()
        sync_documents(stack.indexer_addr, documents, SCOPE)
        seconds = time.perf_counter() - started
        chunks = int(index_stats(stack.indexer_addr)["chunks"])
        single = _load(stack.retriever_addr, queries, 1)
        concurrent = _load(stack.retriever_addr, queries * 2, 16)
        memory = stack.process.memory()
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "query_embedding_ms": _query_embedding_ms(model, args.model_cache, queries),
        "indexing": {
            "chunks": chunks,
            "seconds": round(seconds, 1),
            "chunks_per_s": round(chunks / seconds, 1),
        },
        "retrieve_c1": latency_summary(single.latencies_ms),
        "retrieve_c16_rps": round(concurrent.throughput_rps, 1),
        "retrieve_c16_errors": concurrent.errors,
        "memory": memory,
    }


def _load(addr: str, queries: list[tuple[str, str]], concurrency: int) -> Any:
    def request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text, top_k=10, disable_rerank=True, filter=pb.ScopeFilter(scope_id=SCOPE)
        )

    run_load(addr, queries[:8], request, concurrency=concurrency)  # warm-up
    return run_load(addr, queries, request, concurrency=concurrency, keep_responses=False)


def _query_embedding_ms(model: str, cache: Path, queries: list[tuple[str, str]]) -> float:
    """p50 of one warm query embedding, the model alone in this process."""
    from services.embedding.config import EmbedderConfig
    from services.embedding.embedder import Embedder

    embedder = Embedder(
        EmbedderConfig(model=model, onnx_cache_dir=cache, query_cache_size=0, query_max_batch=1)
    )
    for _, text in queries[:10]:
        embedder.embed_query(text)
    times = []
    for _, text in queries:
        started = time.perf_counter()
        embedder.embed_query(text)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def parse_args(argv: list[str]) -> Any:
    p = argparse.ArgumentParser(
        prog="python -m bench.load.model_speed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    p.add_argument("--documents", type=int, default=400, help="SciFact abstracts to index")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--model-cache", type=Path, default=SCRATCH_DIR / "model-cache")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / RESULTS_FILE)
    p.add_argument("--docs", type=Path, default=BENCHMARKS_MD)
    p.add_argument("--no-docs", action="store_true")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
