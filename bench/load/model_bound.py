"""What the embedding model alone can do on this machine: the bounds the
service figures are compared with. Measured in the benchmark process while
no service runs, with the project's own `Embedder` (the same
sentence-transformers call the services make, minus gRPC and the stores)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common.record import latency_summary
from bench.eval.dataset import indexed_texts
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from services.indexer.app import indexer_parts
from services.indexer.settings import IndexerSettings
from services.retriever.settings import RetrieverSettings
from services.storage.settings import StoreSettings

QUERY_BATCH = 16
WARM_UP_QUERIES = 20


def load_embedder() -> Embedder:
    return Embedder(bound_config())


def bound_config() -> EmbedderConfig:
    """The Indexer's embedder as the services configure it (RAG_EMBEDDING_*),
    so the bounds are those of the backend the stack runs; its query cache
    off, so every query of a loop runs the model, and the Retriever's
    micro-batching of queries (the Indexer's own config has none: with it,
    "batches of 16" ran 16 passes of one and measured no gain)."""
    config = indexer_parts(IndexerSettings()).embedder_config(StoreSettings().data_dir)
    batch = RetrieverSettings().query_max_batch
    return replace(config, query_cache_size=0, query_max_batch=batch)


def query_embedding(embedder: Embedder, queries: Sequence[str]) -> dict[str, Any]:
    """Per-query time, one query at a time (what one Retrieve pays), and the
    throughput of that loop and of batches of QUERY_BATCH queries. Through the
    query path (`embed_query`: the query prompt, fp32 always, the shared-pass
    batcher), not the document encoder, which is int8 where
    RAG_EMBEDDING_DOCUMENT_PRECISION=auto picks it: ~1.5x faster here, so it
    made Retrieve look further from its model than it is."""
    for text in queries[:WARM_UP_QUERIES]:  # first calls per input length are slow
        embedder.embed_query(text)
    times = []
    started = time.perf_counter()
    for text in queries:
        one = time.perf_counter()
        embedder.embed_query(text)
        times.append((time.perf_counter() - one) * 1000)
    sequential_s = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(0, len(queries), QUERY_BATCH):
        embedder.embed_queries(list(queries[i : i + QUERY_BATCH]))
    batched_s = time.perf_counter() - started
    return {
        "backend": embedder.backend,
        "path": "query",
        "queries": len(queries),
        "query_ms": latency_summary(times),
        "bound_qps": round(len(queries) / sequential_s, 2),
        "batch": QUERY_BATCH,
        "batched_qps": round(len(queries) / batched_s, 2),
    }


def chunk_texts(corpus: Path, *, title_as_heading: bool) -> tuple[int, list[str]]:
    """(documents, texts the Indexer embeds for them), so the raw encoder sees
    exactly what indexing embeds."""
    per_document = indexed_texts(corpus, title_as_heading=title_as_heading)
    return len(per_document), [text for texts in per_document.values() for text in texts]


def raw_encoder(embedder: Embedder, documents: int, texts: list[str]) -> dict[str, Any]:
    embedder.embed_documents(texts[:8])
    started = time.perf_counter()
    embedder.embed_documents(texts)
    seconds = time.perf_counter() - started
    return {
        "documents": documents,
        "chunks": len(texts),
        "seconds": round(seconds, 2),
        "docs_per_s": round(documents / seconds, 2),
        "chunks_per_s": round(len(texts) / seconds, 2),
    }


def best_query_embedding(
    embedder: Embedder, queries: Sequence[str], repeats: int
) -> dict[str, Any]:
    """`query_embedding` `repeats` times; the best throughputs and the
    per-query times of the fastest one-at-a-time run."""
    runs = [query_embedding(embedder, queries) for _ in range(max(repeats, 1))]
    best = max(runs, key=lambda run: run["bound_qps"])
    batched = max(run["batched_qps"] for run in runs)
    return {
        **best,
        "batched_qps": batched,
        "runs": [{k: run[k] for k in ("bound_qps", "batched_qps")} for run in runs],
    }
