"""Document-encoding speed on this machine: the int8 ONNX document encoder
(RAG_EMBEDDING_DOCUMENT_PRECISION=int8) against fp32 ONNX (and torch, `--torch`).

The SciFact corpus is chunked exactly as the Indexer chunks it for `make
eval` (BEIR loader with the title as heading, the Indexer's chunking settings
and `embedding_text`: bench.eval.dataset.indexed_texts), and a fixed sample of
those chunks (seeded: every run embeds the same texts) goes through
`Embedder.embed_documents`, the Indexer's own call, short passes included.
Each Embedder is built from IndexerSettings as the Indexer builds its own, in
one process that, like the services, lets idle OpenMP threads sleep. Rounds
interleave the encoders so a load change on a shared machine hits all alike.
Also reports how far int8 document vectors drift from fp32 ones (cosine).
Writes bench/results/document_encoder.json, regenerates docs/benchmarks.md
and prints its section. The defaults take about three minutes on a quiet
2-core machine.

    python -m bench.load.document_encoder [--chunks 1500] [--rounds 3] [--torch]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from services.runtime.cpu import prefer_passive_waits

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# As `python -m services.indexer` runs: torch's idle OpenMP threads, left
# spinning, take the cores from ORT's (measured here without this: int8 only
# 1.55× fp32, 20 ms a chunk instead of 12.6).
prefer_passive_waits()

from bench.common.paths import SHARED_DATASETS, parse_with_outputs  # noqa: E402
from bench.common.record import run_record  # noqa: E402
from bench.eval.dataset import indexed_texts  # noqa: E402
from bench.reports.document_encoder import (  # noqa: E402
    RESULTS_FILE,
    SPEEDUP_TARGET,
    document_encoder_section,
)
from bench.reports.page import publish  # noqa: E402
from services.embedding.embedder import Embedder  # noqa: E402
from services.indexer.app import indexer_parts  # noqa: E402
from services.indexer.settings import IndexerSettings  # noqa: E402

# label → (RAG_EMBEDDING_BACKEND, RAG_EMBEDDING_DOCUMENT_PRECISION)
ENCODERS = {
    "onnx-fp32": ("onnx", "fp32"),
    "onnx-int8": ("onnx", "int8"),
    "torch-fp32": ("torch", "fp32"),
}
REFERENCE, CANDIDATE = "onnx-fp32", "onnx-int8"
WARM_UP_CHUNKS = 16


def sample_chunks(corpus: Path, count: int, seed: int) -> tuple[int, int, list[str]]:
    """(documents, chunks, a seeded sample of `count` chunk texts): the texts
    the Indexer embeds for the corpus, so the sample is what indexing sees."""
    per_document = indexed_texts(corpus, title_as_heading=True)
    texts = [text for chunks in per_document.values() for text in chunks]
    sample = random.Random(seed).sample(texts, min(count, len(texts)))
    return len(per_document), len(texts), sample


def load_embedders(labels: Sequence[str], cache: Path) -> dict[str, dict[str, Any]]:
    """One Embedder per encoder, configured through the Indexer's settings;
    the load time includes the ONNX export and quantization (a fresh cache)."""
    loaded: dict[str, dict[str, Any]] = {}
    for label in labels:
        backend, precision = ENCODERS[label]
        settings = IndexerSettings(
            embedding_backend=backend,
            embedding_document_precision=precision,
            embedding_cache_dir=cache,
        )
        started = time.perf_counter()
        embedder = Embedder(indexer_parts(settings).embedder_config(cache))
        load_s = round(time.perf_counter() - started, 2)
        assert embedder.document_encoder == label, (embedder.document_encoder, label)
        loaded[label] = {"embedder": embedder, "load_s": load_s}
        print(f"  {label}: loaded (incl. export) in {load_s:.1f} s", file=sys.stderr)
    return loaded


def measure(
    embedders: dict[str, dict[str, Any]], texts: list[str], rounds: int
) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """Seconds per round per encoder, the order rotating from round to round,
    and each encoder's vectors (from its last round)."""
    labels = list(embedders)
    for label in labels:
        embedders[label]["embedder"].embed_documents(texts[:WARM_UP_CHUNKS])
    seconds: dict[str, list[float]] = {label: [] for label in labels}
    vectors: dict[str, np.ndarray] = {}
    for round_no in range(rounds):
        for label in labels[round_no % len(labels) :] + labels[: round_no % len(labels)]:
            started = time.perf_counter()
            vectors[label] = embedders[label]["embedder"].embed_documents(texts)
            seconds[label].append(time.perf_counter() - started)
        rates = ", ".join(f"{k} {len(texts) / v[-1]:.1f}" for k, v in seconds.items())
        print(f"  round {round_no + 1}/{rounds}: chunks/s {rates}", file=sys.stderr)
    return seconds, vectors


def speed_summary(seconds: dict[str, list[float]], chunks: int) -> dict[str, Any]:
    """chunks/s per encoder over all rounds and per round, and each one's
    speed-up over fp32 ONNX (overall, and the range of the per-round ratios)."""
    summary: dict[str, Any] = {}
    reference = seconds[REFERENCE]
    for label, values in seconds.items():
        per_round = [chunks / s for s in values]
        ratios = [ref / s for ref, s in zip(reference, values, strict=True)]
        summary[label] = {
            "chunks_per_s": round(chunks * len(values) / sum(values), 1),
            "round_chunks_per_s": [round(rate, 1) for rate in per_round],
            "ms_per_chunk": round(sum(values) / (chunks * len(values)) * 1000, 2),
            "speedup_vs_onnx_fp32": round(sum(reference) / sum(values), 2),
            "round_speedups": [round(ratio, 2) for ratio in ratios],
        }
    return summary


def drift(vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    """Cosine of every encoder's document vectors to fp32 ONNX's (unit
    vectors, so the row-wise dot product)."""
    reference = vectors[REFERENCE]
    result: dict[str, Any] = {}
    for label, rows in vectors.items():
        if label == REFERENCE:
            continue
        cosines = (rows * reference).sum(axis=1)
        result[label] = {
            "min": round(float(cosines.min()), 5),
            "p1": round(float(np.percentile(cosines, 1)), 5),
            "mean": round(float(cosines.mean()), 5),
        }
    return result


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load.document_encoder",
        description=(__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument("--chunks", type=int, default=1500, help="chunks in the sample")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the sample each")
    parser.add_argument("--seed", type=int, default=0, help="of the sample")
    parser.add_argument(
        "--torch", action="store_true", help="also torch, for reference (~2.4x slower than fp32)"
    )
    parser.add_argument(
        "--dataset",
        type=Path,
        default=SHARED_DATASETS / "scifact",
        help="BEIR-layout folder (corpus.jsonl)",
    )
    return parse_with_outputs(parser, argv, RESULTS_FILE)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = parse_args(argv)
    record = run_record(["-m", "bench.load.document_encoder", *argv])
    documents, chunks, texts = sample_chunks(opts.dataset / "corpus.jsonl", opts.chunks, opts.seed)
    labels = [label for label in ENCODERS if opts.torch or not label.startswith("torch")]
    with tempfile.TemporaryDirectory(prefix="document-encoder-bench-") as cache:
        embedders = load_embedders(labels, Path(cache))
        seconds, vectors = measure(embedders, texts, opts.rounds)
    speed = speed_summary(seconds, len(texts))
    lengths = [len(text) for text in texts]
    settings = IndexerSettings()
    result = {
        **record,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "dataset": opts.dataset.name,
        "sample": {
            "documents": documents,
            "corpus_chunks": chunks,
            "chunks": len(texts),
            "seed": opts.seed,
            "chars_mean": round(float(np.mean(lengths)), 1),
            "chars_max": max(lengths),
            "how": "bench.eval.dataset.indexed_texts (title as heading, as make eval indexes), "
            "random.Random(seed).sample",
        },
        "config": {
            "rounds": opts.rounds,
            "batch_size": settings.embedding_batch_size,
            "document_pass_chars": embedders[REFERENCE]["embedder"].config.document_pass_chars,
            "threads": "one per usable CPU (RAG_EMBEDDING_THREADS=0)",
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
            "int8": "onnxruntime.quantization.quantize_dynamic, QInt8 weights, per channel",
        },
        "load_s": {label: embedders[label]["load_s"] for label in labels},
        "results": speed,
        "drift_vs_onnx_fp32": drift(vectors),
        "targets": [
            SPEEDUP_TARGET.assess(
                speed[CANDIDATE]["speedup_vs_onnx_fp32"],
                f"{CANDIDATE} {speed[CANDIDATE]['chunks_per_s']} chunks/s, "
                f"{REFERENCE} {speed[REFERENCE]['chunks_per_s']}",
            )
        ],
    }
    publish(result, opts.out, opts.docs_path, RESULTS_FILE)
    print(document_encoder_section(result))
    print(f"written to {opts.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
