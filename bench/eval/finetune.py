"""`python -m bench.eval.finetune`: fit the embedding model on a dataset's TRAIN split.

docs/targets.md allows a learned model fitted on the train split. This adapts the
packaged all-MiniLM-L6-v2 to a corpus with the usual contrastive recipe: for
every judged (train query, relevant document) pair, the query should embed
closer to the document's first chunk (exactly the text the Indexer embeds:
chunked by the service's chunker, heading path prepended) than to the other
chunks of its batch (in-batch negatives, cross-entropy over scaled cosines).
Three epochs, fixed seed; about 9 minutes on 2 CPU cores for SciFact.

The model is written to .data/models/<dataset>-train-<base>/ with a card
(`finetune.json`: base model, recipe, pairs, loss, weights digest), and
`bench.eval.scifact` evaluates it next to the packaged model through the same RPCs
(training it first when it is missing). It is never the service default: a
corpus-specific model is an operator's decision (`RAG_EMBEDDING_MODEL=<dir>`,
then a re-index).

    python -m bench.eval.finetune                    # fit on every train query
    python -m bench.eval.finetune --holdout 0.25     # validate the recipe: fit on 75%,
                                                # score the other 25% through Retrieve
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import RESULTS_DIR, ROOT, SCRATCH_DIR, SHARED_DATASETS
from bench.common.record import run_record
from bench.eval.dataset import BeirDataset, indexed_texts, write_query_subset
from services.embedding.config import PACKAGED_MODEL

MODELS_DIR = ROOT / ".data" / "models"
CARD = "finetune.json"
WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class Recipe:
    epochs: int = 3  # held-out train: 3 beat 1 (bench/results/<dataset>-finetune-validation.json)
    batch_size: int = 16
    learning_rate: float = 2e-5
    scale: float = 20.0  # cosine similarities are multiplied by this before the softmax
    seed: int = 0


def model_dir(dataset_name: str, base_model: str = PACKAGED_MODEL) -> Path:
    base = base_model.rstrip("/").split("/")[-1].split(":")[-1]
    return MODELS_DIR / f"{dataset_name}-train-{base}"


def weights_file_sha256(model_path: Path) -> str:
    """Short digest of the saved weights: names the eval index built with them,
    so a re-trained model never meets vectors of an earlier one."""
    with (model_path / WEIGHTS).open("rb") as weights:
        return hashlib.file_digest(weights, "sha256").hexdigest()[:12]


def ensure_model(dataset_root: Path) -> Path:
    """The fine-tuned model for a dataset, trained on its train split first
    when it is not on disk (or is incomplete)."""
    target = model_dir(dataset_root.name)
    if not (target / CARD).is_file():
        print(f"no fine-tuned model in {target}: training it on the train split", flush=True)
        main(["--dataset", str(dataset_root)])
    return target


def training_pairs(dataset: BeirDataset, query_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(query, first chunk of a relevant document), as the Indexer embeds it."""
    queries, qrels = dataset.queries(), dataset.qrels()
    wanted = {doc for q in query_ids for doc in qrels[q]}
    first_chunks = first_chunk_texts(dataset.corpus, wanted)
    return [
        (queries[q], first_chunks[doc])
        for q in query_ids
        for doc in sorted(qrels[q])
        if doc in first_chunks
    ]


def first_chunk_texts(corpus: Path, doc_ids: set[str]) -> dict[str, str]:
    # The same loader options as bench.eval.scifact's ingest (title as the H1 heading).
    indexed = indexed_texts(corpus, title_as_heading=True)
    return {doc: texts[0] for doc, texts in indexed.items() if doc in doc_ids and texts}


def train(base_model: str, pairs: list[tuple[str, str]], recipe: Recipe) -> tuple[Any, float]:
    """The base model after `recipe.epochs` passes over `pairs`; and the mean
    loss of the last epoch."""
    import torch
    from sentence_transformers import SentenceTransformer

    from services.embedding.embedder import resolve_model_path

    torch.manual_seed(recipe.seed)
    order = list(pairs)
    shuffle = random.Random(recipe.seed).shuffle
    model = SentenceTransformer(resolve_model_path(base_model), device="cpu")
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate)
    losses: list[float] = []
    for _ in range(recipe.epochs):
        shuffle(order)
        losses = []
        for start in range(0, len(order), recipe.batch_size):
            loss = in_batch_negatives_loss(model, order[start : start + recipe.batch_size], recipe)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    model.eval()
    return model, sum(losses) / max(len(losses), 1)


def in_batch_negatives_loss(model: Any, batch: list[tuple[str, str]], recipe: Recipe) -> Any:
    """Cross-entropy of each query against every passage of the batch, its own
    passage being the right answer (MultipleNegativesRankingLoss)."""
    import torch
    from torch.nn.functional import cross_entropy, normalize

    def embed(texts: list[str]) -> torch.Tensor:
        return normalize(model(model.preprocess(texts))["sentence_embedding"], dim=-1)

    queries, passages = embed([q for q, _ in batch]), embed([p for _, p in batch])
    return cross_entropy(queries @ passages.T * recipe.scale, torch.arange(len(batch)))


def fit(
    dataset: BeirDataset,
    query_ids: list[str],
    target: Path,
    recipe: Recipe,
    record: dict[str, Any],
) -> dict[str, Any]:
    """Train on `query_ids` and save the model with its card; the card."""
    pairs = training_pairs(dataset, query_ids)
    started = time.perf_counter()
    model, loss = train(PACKAGED_MODEL, pairs, recipe)
    model.save(str(target))
    card = {
        **record,
        "base_model": PACKAGED_MODEL,
        "dataset": dataset.name,
        "split": dataset.split,
        "queries": len(query_ids),
        "pairs": len(pairs),
        "pair": "(query, first chunk of a judged document as the Indexer embeds it)",
        "loss": "in-batch negatives (MultipleNegativesRankingLoss), AdamW",
        "recipe": asdict(recipe),
        "last_epoch_mean_loss": round(loss, 4),
        "train_seconds": round(time.perf_counter() - started, 1),
        "weights_sha256_12": weights_file_sha256(target),
    }
    (target / CARD).write_text(json.dumps(card, indent=2) + "\n")
    return card


def split_queries(query_ids: list[str], holdout: float, seed: int) -> tuple[list[str], list[str]]:
    ids = sorted(query_ids)
    random.Random(seed).shuffle(ids)
    cut = len(ids) - round(len(ids) * holdout)
    return ids[:cut], ids[cut:]


def validate(
    dataset: BeirDataset, holdout: float, recipe: Recipe, record: dict[str, Any]
) -> dict[str, Any]:
    """Fit on part of the train split and score the held-out rest through the
    real RPCs (vector and hybrid), with the packaged and the fitted model.
    The evaluation runs as its own process, `python -m bench.eval.scifact`,
    as it would by hand (and so this module does not import the one that
    imports it)."""
    fitted, held_out = split_queries(list(dataset.queries()), holdout, recipe.seed)
    work = SCRATCH_DIR / "finetune"
    card = fit(dataset, fitted, work / "model", recipe, record)
    # Named like the dataset, so bench.eval.scifact finds its fitted BM25 boosts and
    # reuses the packaged model's index of the same corpus.
    subset = write_query_subset(dataset, work / "held-out" / dataset.name, set(held_out))
    scores = {}
    for label, model in (("packaged", None), ("fine-tuned", work / "model")):
        out = work / "eval" / label
        extra = ["--embedding-model", str(model)] if model else []
        common = ["--dataset", str(subset), "--split", "train", "--no-peer", "--out", str(out)]
        evaluate = ["-m", "bench.eval.scifact", *common, "--configs", "vector,hybrid", *extra]
        subprocess.run([sys.executable, *evaluate], check=True)
        result = json.loads((out / f"{dataset.name}-train.json").read_text())
        scores[label] = {name: result["configs"][name] for name in ("vector", "hybrid")}
    return {
        **record,
        "fitted_queries": len(fitted),
        "held_out_queries": len(held_out),
        "card": card,
        "scores": scores,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(
        prog="python -m bench.eval.finetune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    p.add_argument(
        "--holdout",
        type=float,
        help="validate the recipe: fit on the rest of train, score this fraction of it",
    )
    defaults = Recipe()
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    args = p.parse_args(argv)
    dataset = BeirDataset(args.dataset, "train")
    dataset.check()
    record = run_record(["-m", "bench.eval.finetune", *argv])
    recipe = Recipe(args.epochs, args.batch_size, args.learning_rate)
    if args.holdout:
        run = validate(dataset, args.holdout, recipe, record)
        path = record_validation(dataset.name, run)
        for label, scores in run["scores"].items():
            print(label, {name: s["ndcg@10"] for name, s in scores.items()})
        print(f"wrote {path}")
        return 0
    card = fit(dataset, list(dataset.queries()), model_dir(dataset.name), recipe, record)
    print(f"wrote {model_dir(dataset.name)} ({card['pairs']} pairs, {card['train_seconds']} s)")
    return 0


def validation_file(dataset_name: str) -> Path:
    """Where `--holdout` records how each recipe did on the held-out queries."""
    return RESULTS_DIR / f"{dataset_name}-finetune-validation.json"


def record_validation(dataset_name: str, run: dict[str, Any]) -> Path:
    """Add a validation run to the dataset's record, replacing an earlier run
    of the same recipe on the same split of the queries."""
    path = validation_file(dataset_name)
    record: dict[str, Any] = {"dataset": dataset_name}
    if path.is_file():
        record = json.loads(path.read_text())

    def key(entry: dict[str, Any]) -> tuple[Any, ...]:
        return entry["card"]["recipe"], entry["held_out_queries"]

    record["runs"] = [*(r for r in record.get("runs", []) if key(r) != key(run)), run]
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
