"""bench.eval.finetune: the training pairs are the text the Indexer embeds, the
held-out split is disjoint and reproducible, and a short fit on the real model
really moves it (a handful of pairs and real optimizer steps: seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.common.record import run_record
from bench.eval.dataset import BeirDataset
from bench.eval.finetune import (
    CARD,
    Recipe,
    fit,
    split_queries,
    training_pairs,
    weights_file_sha256,
)

pytestmark = pytest.mark.integration

# Deliberately arbitrary pairings: the base model has no reason to match these
# queries to these documents, so only training can pull them together.
DOCS = {
    "d1": ("Tide tables of the northern harbour", "High water falls at dawn. " * 60),
    "d2": ("Sourdough starter care", "Feed the starter with flour and water daily."),
    "d3": ("Replacing a bicycle chain", "Measure chain stretch before replacing it."),
    "d4": ("Pruning apple trees in winter", "Cut crossing branches on a dry day."),
}
QUERIES = {
    "q1": ("code word amber", ["d1"]),
    "q2": ("code word cobalt", ["d2"]),
    "q3": ("code word jade", ["d3"]),
    "q4": ("code word scarlet", ["d4", "d1"]),
    "q5": ("a query without a document in the corpus", ["missing"]),
}


def write_dataset(root: Path) -> BeirDataset:
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as out:
        for doc_id, (title, text) in DOCS.items():
            out.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (root / "queries-train.jsonl").open("w") as out:
        for query_id, (text, _) in QUERIES.items():
            out.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    with (root / "qrels" / "train.tsv").open("w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query_id, (_, docs) in QUERIES.items():
            out.writelines(f"{query_id}\t{doc}\t1\n" for doc in docs)
    return BeirDataset(root, "train")


def test_holdout_split_is_disjoint_complete_and_reproducible() -> None:
    ids = [f"q{i}" for i in range(100)]
    fitted, held_out = split_queries(ids, 0.25, seed=0)
    assert len(held_out) == 25 and not set(fitted) & set(held_out)
    assert sorted(fitted + held_out) == sorted(ids)
    assert split_queries(list(reversed(ids)), 0.25, seed=0) == (fitted, held_out)
    assert split_queries(ids, 0.25, seed=1) != (fitted, held_out)


def test_pairs_are_each_judged_documents_first_chunk_with_its_title(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "tiny")
    pairs = training_pairs(dataset, ["q1", "q4", "q5"])
    # q4 judges two documents; q5's document is not in the corpus.
    assert [query for query, _ in pairs] == ["code word amber"] + ["code word scarlet"] * 2
    long_doc = pairs[0][1]
    title, body = DOCS["d1"]
    assert long_doc.startswith(f"# {title}\n\nHigh water falls at dawn.")
    assert len(long_doc) <= 1000 < len(body)  # the first chunk only, not the whole text
    assert pairs[1][1] == long_doc and pairs[2][1].startswith("# Pruning apple trees in winter")


def test_fit_pulls_each_query_towards_its_own_document(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from services.embedding.embedder import resolve_model_path

    dataset = write_dataset(tmp_path / "tiny")
    pairs = training_pairs(dataset, ["q1", "q2", "q3"])
    before = own_document_margin(SentenceTransformer(resolve_model_path("")), pairs)
    target = tmp_path / "model"
    recipe = Recipe(epochs=8, batch_size=3, learning_rate=1e-4)
    card = fit(dataset, ["q1", "q2", "q3"], target, recipe, run_record(["test"]))
    after = own_document_margin(SentenceTransformer(str(target)), pairs)
    assert after > before + 0.05, (before, after)
    assert json.loads((target / CARD).read_text()) == card
    assert card["pairs"] == 3 and card["queries"] == 3 and card["recipe"]["epochs"] == 8
    assert card["weights_sha256_12"] == weights_file_sha256(target)


def own_document_margin(model: object, pairs: list[tuple[str, str]]) -> float:
    """Mean cosine of each query with its own document minus with the others."""
    encode = model.encode  # type: ignore[attr-defined]
    queries = encode([q for q, _ in pairs], normalize_embeddings=True)
    passages = encode([p for _, p in pairs], normalize_embeddings=True)
    similarity = np.asarray(queries) @ np.asarray(passages).T
    own = float(np.mean(np.diag(similarity)))
    others = float(np.mean(similarity[~np.eye(len(pairs), dtype=bool)]))
    return own - others


def validation_run(epochs: int, hybrid: float) -> dict[str, object]:
    scores = {"vector": {"ndcg@10": 0.5}, "hybrid": {"ndcg@10": hybrid}}
    return {
        "command": f"python -m bench.eval.finetune --holdout 0.25 --epochs {epochs}",
        "date": "2026-11-22T00:00:00+00:00",
        "fitted_queries": 6,
        "held_out_queries": 2,
        "card": {"recipe": {**Recipe().__dict__, "epochs": epochs}},
        "scores": {"packaged": scores, "fine-tuned": scores},
    }


def test_validation_keeps_one_run_per_recipe_and_the_report_marks_the_used_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench.eval.finetune
    from bench.reports.finetune import validation_note

    monkeypatch.setattr(bench.eval.finetune, "RESULTS_DIR", tmp_path)
    bench.eval.finetune.record_validation("tiny", validation_run(1, 0.61))
    bench.eval.finetune.record_validation("tiny", validation_run(3, 0.62))
    path = bench.eval.finetune.record_validation("tiny", validation_run(1, 0.63))  # re-run of 1
    record = json.loads(path.read_text())
    assert [r["card"]["recipe"]["epochs"] for r in record["runs"]] == [3, 1]
    assert record["runs"][1]["scores"]["fine-tuned"]["hybrid"]["ndcg@10"] == 0.63
    note = validation_note(record, {**Recipe().__dict__, "epochs": 3})
    used = [line for line in note.splitlines() if line.endswith("| used |")]
    assert len(used) == 1 and used[0].startswith("| 3 epoch(s)") and "| 0.620 |" in used[0]
    assert "not validated" not in note and "has not been" not in note
    assert "has not been validated" in validation_note(None, Recipe().__dict__)


def test_ensure_model_trains_once_on_the_whole_train_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench.eval.finetune

    monkeypatch.setattr(bench.eval.finetune, "MODELS_DIR", tmp_path / "models")
    dataset = write_dataset(tmp_path / "tiny")
    model = bench.eval.finetune.ensure_model(dataset.root)
    assert model == tmp_path / "models" / "tiny-train-all-MiniLM-L6-v2"
    card = json.loads((model / CARD).read_text())
    assert card["queries"] == 5 and card["pairs"] == 5  # q5's document is missing
    assert "-m bench.eval.finetune --dataset" in card["command"]
    written = (model / CARD).stat().st_mtime_ns
    assert bench.eval.finetune.ensure_model(dataset.root) == model
    assert (model / CARD).stat().st_mtime_ns == written  # found, not trained again


def test_held_out_subset_is_the_whole_corpus_with_only_the_chosen_queries(
    tmp_path: Path,
) -> None:
    from bench.eval.dataset import write_query_subset

    dataset = write_dataset(tmp_path / "tiny")
    subset = BeirDataset(write_query_subset(dataset, tmp_path / "held-out", {"q2", "q4"}), "train")
    subset.check()
    assert subset.corpus.read_text() == dataset.corpus.read_text()
    assert subset.corpus.is_symlink()  # linked, not copied
    assert subset.queries() == {"q2": "code word cobalt", "q4": "code word scarlet"}
    assert subset.qrels() == {"q2": {"d2": 1}, "q4": {"d4": 1, "d1": 1}}
