"""The vector store alone at scale, once per RAG_VECTOR_QUANTIZATION value.

    python -m bench.scale.vector_storage --size 200000 --quantization none int8

For each value: the scale bench's synthetic corpus (seed 7, multilingual-e5-small
vectors) written through `EdgeVectorStore` as the Indexer writes it (runs of
500 documents), the HNSW index built in process, with this process's memory
peaks per phase (its own heap, and the store files it maps). Then, in a fresh
process, the SciFact test questions searched as the Retriever searches (limit
50, the visibility filter, whole payload, the store's own `hnsw_ef`) three
times, warm; recall@10 and @50 against exact search (numpy over the written
vectors); that process's memory afterwards. Results in
bench/results/vector-quantization.json; the indexes in .data/vector-storage/
(removed unless --keep).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.memory_peaks import STATUS, MemoryPeaks, resident_mib
from bench.common.paths import RESULTS_DIR, ROOT
from bench.scale.build import DOCS_PER_RUN, document_runs
from bench.scale.corpus import CorpusSpec, SyntheticCorpus
from bench.scale.measure import CANDIDATES, SCALE_MODEL
from bench.scale.source import SourceCorpus, load_source
from services.core.models import ScopeFilter
from services.storage.base import VectorQuantization, VectorQuery, unrequested_deadline
from services.storage.embedded.qdrant_edge import EdgeVectorStore

INDEX_ROOT = ROOT / ".data" / "vector-storage"
RESULTS_FILE = RESULTS_DIR / "vector-quantization.json"
ROUNDS = 3


def build(source: SourceCorpus, size: int, quantization: VectorQuantization) -> dict[str, Any]:
    """Write and index `size` chunks into INDEX_ROOT/<quantization>; the
    vectors also go, in write order, to a raw float32 file for exact search."""
    folder = INDEX_ROOT / quantization.value
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    corpus = SyntheticCorpus(source, CorpusSpec(chunks=size, seed=7))
    dim = int(source.query_vectors.shape[1])
    report: dict[str, Any] = {"quantization": quantization.value}
    with MemoryPeaks() as peaks, (folder / "vectors.f32").open("wb") as raw:
        report["before_mib"] = peaks.take()
        store = EdgeVectorStore(
            folder / "shard", dim, optimize_apart=False, quantization=quantization
        )
        started = time.perf_counter()
        ids, generation = _write(store, corpus, raw)
        report["write_s"] = round(time.perf_counter() - started, 1)
        report["written_mib"] = peaks.take()
        started = time.perf_counter()
        store.optimize()
        report["hnsw_build_s"] = round(time.perf_counter() - started, 1)
        report["indexed_mib"] = peaks.take()
        store.close()
    (folder / "ids.json").write_text(json.dumps({"ids": ids, "generation": generation}))
    shard = folder / "shard"
    report["disk_mib"] = round(
        sum(p.stat().st_size for p in shard.rglob("*") if p.is_file()) / 2**20
    )
    return report


def _write(store: EdgeVectorStore, corpus: SyntheticCorpus, raw: Any) -> tuple[list[str], int]:
    ids: list[str] = []
    generation = 0
    for generation, batch in enumerate(document_runs(corpus, DOCS_PER_RUN), start=1):
        chunks = [replace(c, generation=generation) for d in batch for c in d.chunks]
        vectors = np.concatenate([d.vectors for d in batch]).astype(np.float32)
        store.upsert(chunks, vectors.tolist(), unrequested_deadline())
        raw.write(vectors.tobytes())
        ids += [c.chunk_id for c in chunks]
    return ids, generation


def serve(source: SourceCorpus, quantization: VectorQuantization) -> dict[str, Any]:
    """Search the built index (run in a fresh process: its memory is the reader's)."""
    folder = INDEX_ROOT / quantization.value
    written = json.loads((folder / "ids.json").read_text())
    dim = int(source.query_vectors.shape[1])
    store = EdgeVectorStore(folder / "shard", dim, quantization=quantization)
    scope = ScopeFilter(visible_generation=written["generation"])
    times: list[float] = []
    found: list[list[str]] = []
    for _ in range(ROUNDS):
        found = []
        for vector in source.query_vectors:
            started = time.perf_counter()
            query = VectorQuery(vector.tolist(), CANDIDATES, scope)
            hits = store.search_many([query], unrequested_deadline())[0]
            times.append(time.perf_counter() - started)
            found.append([hit.chunk.chunk_id for hit in hits])
    memory = resident_mib(STATUS.read_text())
    store.close()
    warm_ms = np.array(times[len(source.query_vectors) :]) * 1000
    return {
        "search_p50_ms_warm": round(float(np.median(warm_ms)), 2),
        "search_p90_ms_warm": round(float(np.percentile(warm_ms, 90)), 2),
        **_recalls(folder, written["ids"], source.query_vectors, found, dim),
        "reader_mib": memory,
    }


def _recalls(
    folder: Path, ids: list[str], queries: np.ndarray, found: list[list[str]], dim: int
) -> dict[str, float]:
    vectors = np.fromfile(folder / "vectors.f32", dtype=np.float32).reshape(-1, dim)
    at_10, at_50 = [], []
    for query, got in zip(queries, found, strict=True):
        exact = [ids[row] for row in np.argsort(-(vectors @ query))[:CANDIDATES]]
        at_10.append(len(set(exact[:10]) & set(got[:10])) / 10)
        at_50.append(len(set(exact) & set(got)) / CANDIDATES)
    return {
        "recall_at_10": round(float(np.mean(at_10)), 4),
        "recall_at_50": round(float(np.mean(at_50)), 4),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.scale.vector_storage", description=__doc__)
    p.add_argument("--size", type=int, default=200_000, help="chunks")
    p.add_argument(
        "--quantization", nargs="+", default=[q.value for q in VectorQuantization], help="values"
    )
    p.add_argument("--serve-only", help=argparse.SUPPRESS)  # the fresh reader process
    p.add_argument("--keep", action="store_true", help="keep the indexes")
    p.add_argument("--out", type=Path, default=RESULTS_FILE)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    source = load_source(SCALE_MODEL)
    if args.serve_only:
        print(json.dumps(serve(source, VectorQuantization(args.serve_only))))
        return 0
    rows = []
    for value in args.quantization:
        row = build(source, args.size, VectorQuantization(value))
        reader = [sys.executable, "-m", "bench.scale.vector_storage", "--serve-only", value]
        answer = subprocess.run(reader, cwd=ROOT, check=True, capture_output=True, text=True)
        row |= json.loads(answer.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not args.keep:
            shutil.rmtree(INDEX_ROOT / value, ignore_errors=True)
    args.out.write_text(json.dumps({"size": args.size, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
