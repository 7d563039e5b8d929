"""`python -m bench.eval.rerank_fit`: fit how the final order combines the
fused rank with the cross-encoder's, on training queries only, and compare
fused, cross-encoder alone and the fitted blend on the test queries.

Reads the candidates `bench.eval.rerank_candidates` kept (the first 20 of
`Retrieve` in fused order, rerank off), scores every (question, candidate)
pair with the packaged cross-encoder in process (the Reranker's own backend,
`PackagedCrossEncoderBackend`, at `--max-length` tokens; pairs the model does
not read are left out exactly as the Retriever leaves them out), orders them
with the Retriever's own `place_reranked`, and scores the orders at document
level. The grid point with the best train nDCG@10 is chosen; a point that is
worse than fusion alone on train is never chosen (fusion alone is in the grid:
fused weight 1, reranker weight 0). Writes bench/results/rerank_fit.json.

    python -m bench.eval.rerank_fit                       # SciFact subset, 256 tokens
    python -m bench.eval.rerank_fit --max-length 128
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from bench.common.paths import RESULTS_DIR
from bench.common.record import run_record
from bench.eval.dataset import BeirDataset, Qrels
from bench.eval.metrics import distinct_documents, evaluate
from bench.eval.rerank_candidates import CANDIDATES_DIR, candidates_file
from services.retriever.fusion import RerankBlend, reranked_order
from services.retriever.rerank_languages import ReadableFilter

FUSED_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
KS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0)
FUSION_ONLY = RerankBlend(1.0, 0.0, 60.0)
OBJECTIVE = "nDCG@10 on the train queries"
ENGLISH = ReadableFilter({"en"})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.eval.rerank_fit", description=__doc__)
    p.add_argument("--dataset", type=Path, default=CANDIDATES_DIR / "scifact")
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--candidates", type=int, default=20, help="the first N fused candidates")
    p.add_argument("--queries", type=int, default=0, help="per split, the first N (0: all)")
    p.add_argument("--scorer", choices=("cross-encoder", "colbert"), default="cross-encoder")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    record = run_record(["-m", "bench.eval.rerank_fit", *(argv or sys.argv[1:])])
    scorer = make_scorer(args.scorer, args.max_length)
    splits = {
        split: load_split(args.dataset, split, scorer, args.candidates, args.queries)
        for split in ("train", "test")
    }
    grid = [
        {"fused_weight": w, "rerank_weight": 1.0, "k": k, **score_split(splits["train"], blend)}
        for w in FUSED_WEIGHTS
        for k in KS
        for blend in [RerankBlend(w, 1.0, k)]
    ]
    baseline = score_split(splits["train"], FUSION_ONLY)
    best = max(grid, key=lambda point: point["ndcg@10"])
    chosen = (
        best if best["ndcg@10"] > baseline["ndcg@10"] else {**baseline, **_as_dict(FUSION_ONLY)}
    )
    blend = RerankBlend(chosen["fused_weight"], chosen["rerank_weight"], chosen["k"])
    result = {
        **record,
        "dataset": str(args.dataset),
        "scorer": args.scorer,
        "model": MODELS[args.scorer],
        "max_length": args.max_length,
        "candidates": splits["train"]["top_k"],
        "objective": OBJECTIVE,
        "chosen": _as_dict(blend),
        "train": {"fused": baseline, "chosen": chosen, "grid": grid},
        "test": compare(splits["test"], blend),
        # None: every score came from the cache (an earlier run of the same command).
        "scoring_ms_per_pair": round(scorer.ms_per_pair(), 1) if scorer.ms_per_pair() else None,
    }
    out = args.out or RESULTS_DIR / f"rerank_fit-{args.scorer}-{args.max_length}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("chosen", "test", "scoring_ms_per_pair")}, indent=2))
    return 0


def _as_dict(blend: RerankBlend) -> dict[str, float]:
    return {"fused_weight": blend.fused_weight, "rerank_weight": blend.rerank_weight, "k": blend.k}


def compare(split: dict[str, Any], blend: RerankBlend) -> dict[str, Any]:
    """Fusion alone, the cross-encoder alone, and the blend, on one split."""
    return {
        "queries": len(split["rows"]),
        "fused": score_split(split, FUSION_ONLY),
        "cross_encoder_only": score_split(split, RerankBlend(0.0, 1.0, 1.0)),
        "blend": score_split(split, blend),
    }


MODELS = {
    "cross-encoder": "packaged:ms-marco-MiniLM-L-12-v2",
    "colbert": "packaged:answerai-colbert-small-v1",
}


def make_scorer(name: str, max_length: int) -> Scorer:
    return PairScorer(max_length, MODELS[name])


class Scorer(Protocol):
    max_length: int

    def scores(self, query: str, passages: list[str]) -> list[float]: ...

    def ms_per_pair(self) -> float: ...


class PairScorer:
    """The Reranker's packaged backend of `model` (the cross-encoder, or
    ColBERT's MaxSim), in process, batches of 8."""

    def __init__(self, max_length: int, model: str = MODELS["cross-encoder"]) -> None:
        from services.embedding.packaged_files import packaged_reranker, verified_folder
        from services.reranker.colbert_backend import PackagedColbertBackend
        from services.reranker.packaged_backend import PackagedCrossEncoderBackend

        late = packaged_reranker(model).kind == "late-interaction"
        backend_type = PackagedColbertBackend if late else PackagedCrossEncoderBackend
        self.max_length = max_length
        self.backend = backend_type(verified_folder(model), max_length, threads=2)
        self.pairs = 0
        self.seconds = 0.0

    def scores(self, query: str, passages: list[str]) -> list[float]:
        started = time.perf_counter()
        out: list[float] = []
        for start in range(0, len(passages), 8):
            batch = [(query, passage) for passage in passages[start : start + 8]]
            out.extend(float(v) for v in self.backend.logits(batch).reshape(len(batch), -1)[:, -1])
        self.seconds += time.perf_counter() - started
        self.pairs += len(passages)
        return out

    def ms_per_pair(self) -> float:
        return 1000 * self.seconds / self.pairs if self.pairs else 0.0


def load_split(
    root: Path, split: str, scorer: Scorer, candidates: int, queries: int
) -> dict[str, Any]:
    """The split's candidates with their scores (cached beside the
    candidates, per scorer and max length)."""
    dataset = BeirDataset(root, split)
    path = candidates_file(root.name, split)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = rows[:queries] if queries else rows
    for row in rows:
        row["hits"] = row["hits"][:candidates]
    name = type(scorer).__name__
    cache = path.with_suffix(f".{name}-{scorer.max_length}-{candidates}.json")
    cached: dict[str, dict[str, float]] = json.loads(cache.read_text()) if cache.exists() else {}
    for row in rows:
        if row["query_id"] not in cached:
            cached[row["query_id"]] = readable_scores(row, scorer)
    cache.write_text(json.dumps(cached))
    top_k = max((len(row["hits"]) for row in rows), default=0)
    return {"rows": rows, "scores": cached, "qrels": dataset.qrels(), "top_k": top_k}


def passage(hit: dict[str, Any]) -> str:
    # As the Retriever sends it (services.retriever.reranking.passage_text).
    return f"{hit['title']}\n{hit['text']}" if hit["title"] else hit["text"]


def readable_scores(row: dict[str, Any], scorer: Scorer) -> dict[str, float]:
    """Scores by position (as a string), for the pairs the model reads."""
    if ENGLISH.unread(row["query"]):
        return {}
    positions = [i for i, hit in enumerate(row["hits"]) if not ENGLISH.unread(passage(hit))]
    values = scorer.scores(row["query"], [passage(row["hits"][i]) for i in positions])
    return {str(i): v for i, v in zip(positions, values, strict=True)}


def score_split(split: dict[str, Any], blend: RerankBlend) -> dict[str, float]:
    run = {row["query_id"]: ordered_docs(row, split["scores"], blend) for row in split["rows"]}
    qrels: Qrels = {q: docs for q, docs in split["qrels"].items() if q in run}
    metrics = evaluate(qrels, run)
    hit1 = [
        1.0 if docs and qrels.get(q, {}).get(docs[0], 0) > 0 else 0.0 for q, docs in run.items()
    ]
    keep = ("ndcg@10", "mrr@10")
    return {
        **{k: round(metrics[k], 4) for k in keep},
        "hit@1": round(sum(hit1) / len(hit1), 4),
    }


def ordered_docs(
    row: dict[str, Any], scores: dict[str, dict[str, float]], blend: RerankBlend
) -> list[str]:
    hits = row["hits"]
    if blend.rerank_weight == 0:
        return distinct_documents([hit["doc_id"] for hit in hits])
    by_position = {int(p): v for p, v in scores.get(row["query_id"], {}).items()}
    order = reranked_order(len(hits), by_position, blend)
    return distinct_documents([hits[i]["doc_id"] for i in order])


if __name__ == "__main__":
    raise SystemExit(main())
