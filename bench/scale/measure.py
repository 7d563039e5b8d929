"""What the scale bench measures on a built index: `Retrieve` through the real
stack process (latency at concurrency 1 and 16, with and without a scope
filter, memory), and the vector channel's HNSW recall@10 against exact search.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from bench.common.memory_cap import ChildMemoryCap, evict_from_page_cache
from bench.common.processes import Stack, free_port
from bench.common.record import latency_summary
from bench.common.retrieve_loop import LoadResult, run_load
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.models import ScopeFilter
from services.embedding.config import MULTILINGUAL_MODEL
from services.storage.base import DEFAULT_VECTOR_SEARCH, SearchEf
from services.storage.embedded.edge_filter import edge_filter
from services.storage.embedded.qdrant_edge import search_params

CONCURRENCY = (1, 16)
# What the Retriever asks each channel for by default (RAG_CANDIDATES_PER_CHANNEL).
CANDIDATES = 50
RECALL_AT = 10


# The services' default model: the source vectors the corpus is synthesised
# from and the stack's query vectors come from the same one (they were
# MiniLM's and e5's until 2026-11-29: recall stayed right, since it is
# measured with the source's own query vectors, but the hits were not).
SCALE_MODEL = MULTILINGUAL_MODEL


def stack_env() -> dict[str, str]:
    return {
        "RAG_EMBEDDING_MODEL": SCALE_MODEL,
        "RAG_QUERY_CACHE_SIZE": "0",  # every request embeds its query
        "RAG_RERANKER_ADDR": "",
        "RAG_INDEXER_METRICS_PORT": str(free_port()),
        "RAG_RETRIEVER_METRICS_PORT": str(free_port()),
    }


def _requests(scope: str | None) -> Any:
    def make(text: str) -> pb.RetrieveRequest:
        scope_filter = pb.ScopeFilter(scope_id=scope) if scope else None
        return pb.RetrieveRequest(query=text, disable_rerank=True, filter=scope_filter)

    return make


def _cycle(queries: Sequence[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    return [queries[i % len(queries)] for i in range(count)]


def _row(label: str, run: LoadResult) -> dict[str, Any]:
    return {
        "filter": label,
        "concurrency": run.concurrency,
        "requests": len(run.answers),
        "errors": run.errors,
        "throughput_rps": run.throughput_rps,
        "latency_ms": latency_summary(run.latencies_ms),
        "hits_mean": round(
            float(np.mean([len(a.response.hits) for a in run.answers if a.response])), 2
        )
        if run.latencies_ms
        else 0.0,
    }


def measure_serving(
    data_dir: Path,
    filter_scope: str,
    queries: Sequence[tuple[str, str]],
    log_dir: Path,
    requests: int,
) -> dict[str, Any]:
    """Start the stack on the index, load it, stop it."""
    return _serve(data_dir, filter_scope, queries, log_dir, requests)


def measure_capped_serving(
    data_dir: Path,
    filter_scope: str,
    queries: Sequence[tuple[str, str]],
    log_dir: Path,
    requests: int,
    limit_mib: int,
) -> dict[str, Any]:
    """As `measure_serving`, the stack inside a memory cgroup of `limit_mib`
    (bench.common.memory_cap.ChildMemoryCap). The index's files are first
    evicted from the page cache, so every page the stack reads counts against
    the limit; each filter's queries are sent once before the timed load, so
    the rows show the steady state under the limit, not the first reads from
    disk. A stack killed for want of memory is recorded as such."""
    evicted = evict_from_page_cache(data_dir)
    failure = ""
    with ChildMemoryCap(limit_mib) as cap:
        try:
            served = _serve(
                data_dir, filter_scope, queries, log_dir, requests, cap.procs, warm=True
            )
        # Killed at the limit, it fails in whatever call meets it first: that
        # is a finding to record, not a reason to lose the rest of the record.
        except Exception as exc:
            served, failure = {}, f"{type(exc).__name__}: {str(exc)[-500:]}"
    assert cap.report is not None
    return {
        **served,
        "memory_cap": cap.report.as_record(),
        "evicted_mib": evicted // 2**20,
        "failure": failure,
    }


def _serve(
    data_dir: Path,
    filter_scope: str,
    queries: Sequence[tuple[str, str]],
    log_dir: Path,
    requests: int,
    cgroup_procs: Path | None = None,
    warm: bool = False,
) -> dict[str, Any]:
    started = time.perf_counter()
    log_name = f"stack-{data_dir.name}{'-capped' if cgroup_procs else ''}.log"
    stack = Stack.start(
        data_dir, log_dir, stack_env(), log_name=log_name, cgroup_procs=cgroup_procs
    )
    ready_s = time.perf_counter() - started
    rows: list[dict[str, Any]] = []
    try:
        idle = stack.process.memory()
        for label, scope in (("none", None), ("1% scope", filter_scope)):
            make = _requests(scope)
            if warm:
                run_load(stack.retriever_addr, list(queries), make)
            for concurrency in CONCURRENCY:
                batch = _cycle(queries, requests * (2 if concurrency > 1 else 1))
                run_load(
                    stack.retriever_addr, batch[: 2 * concurrency], make, concurrency=concurrency
                )
                run = run_load(stack.retriever_addr, batch, make, concurrency=concurrency)
                rows.append(_row(label, run))
                print(f"  {label} c={concurrency}: {rows[-1]['latency_ms']}", flush=True)
        memory = {"after start": idle, "after load": stack.process.memory()}
    finally:
        stack.stop()
    return {"ready_s": round(ready_s, 1), "retrieve": rows, "memory": memory}


def hnsw_recall(
    vectors_dir: Path,
    query_vectors: np.ndarray,
    generation: int,
    filter_scope: str,
    search_ef: SearchEf = DEFAULT_VECTOR_SEARCH,
) -> dict[str, float]:
    """Recall@10 of the vector channel's search (limit and `hnsw_ef` as the
    Retriever's vector store asks) against exact search, with the visibility
    filter every Retrieve carries, with and without the scope filter."""
    shard = qe.EdgeShard.load(str(vectors_dir))
    try:
        return {
            label: _recall(
                shard,
                query_vectors,
                ScopeFilter(scope_id=scope, visible_generation=generation),
                search_ef,
            )
            for label, scope in (("none", ""), ("1% scope", filter_scope))
        }
    finally:
        shard.close()


def _recall(
    shard: qe.EdgeShard, query_vectors: np.ndarray, scope: ScopeFilter, search_ef: SearchEf
) -> float:
    found = []
    ef = search_ef.candidates(CANDIDATES, shard.info().points_count)
    approximate = search_params(ef)  # as the store asks: rescored where quantized
    # Exact means the original vectors: a quantized segment's exact search
    # would otherwise read its int8 copy.
    originals = qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))
    for vector in query_vectors:
        hnsw = _top_ids(shard, vector, scope, CANDIDATES, approximate)[:RECALL_AT]
        exact = _top_ids(shard, vector, scope, RECALL_AT, originals)
        found.append(len(set(hnsw) & set(exact)) / max(len(exact), 1))
    return round(float(np.mean(found)), 4)


def _top_ids(
    shard: qe.EdgeShard, vector: np.ndarray, scope: ScopeFilter, limit: int, params: Any
) -> list[str]:
    request = qe.QueryRequest(
        limit=limit,
        query=qe.Query.Nearest(vector.tolist()),
        filter=edge_filter(scope),
        with_payload=False,
        params=params,
    )
    return [str(point.id) for point in shard.query(request)]
