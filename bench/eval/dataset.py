"""BEIR-layout datasets: queries and relevance judgments, and the small
subset the smoke runs use.

Layout (as in `shared/datasets/scifact`): `corpus.jsonl`,
`queries-<split>.jsonl` (or BEIR's single `queries.jsonl`) and
`qrels/<split>.tsv` with a header line `query-id corpus-id score`.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from bench.common.paths import RESULTS_DIR, SCRATCH_DIR

Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True)
class BeirDataset:
    root: Path
    split: str = "test"

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def corpus(self) -> Path:
        return self.root / "corpus.jsonl"

    @property
    def queries_path(self) -> Path:
        per_split = self.root / f"queries-{self.split}.jsonl"
        return per_split if per_split.is_file() else self.root / "queries.jsonl"

    def check(self) -> None:
        for path in (self.corpus, self.queries_path, self.root / "qrels" / f"{self.split}.tsv"):
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing (BEIR layout expected)")

    def qrels(self) -> Qrels:
        judged: Qrels = {}
        with (self.root / "qrels" / f"{self.split}.tsv").open(newline="") as rows:
            reader = csv.reader(rows, delimiter="\t")
            for row in reader:
                if not row or row[0] == "query-id":
                    continue
                query_id, doc_id, score = row[0], row[1], int(row[2])
                judged.setdefault(query_id, {})[doc_id] = score
        return judged

    def queries(self) -> dict[str, str]:
        """The queries that have judgments in this split, in file order."""
        judged = self.qrels()
        found: dict[str, str] = {}
        with self.queries_path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    record = json.loads(line)
                    if str(record["_id"]) in judged:
                        found[str(record["_id"])] = record["text"]
        return found


def indexed_texts(corpus: Path, *, title_as_heading: bool) -> dict[str, list[str]]:
    """Per document of a BEIR corpus, in corpus order, the texts the Indexer
    embeds for it: same loader, chunking settings (RAG_CHUNK_*) and
    `embedding_text`."""
    from services.core.models import Document
    from services.indexer.app import chunking_params
    from services.indexer.chunking import Chunker
    from services.indexer.planning import document_chunks
    from services.indexer.settings import IndexerSettings
    from services.sources.loaders import load_beir_jsonl
    from services.storage.storage import embedding_text

    settings = IndexerSettings()
    chunker = Chunker(chunking_params(settings))
    loaded = load_beir_jsonl(corpus, scope_id="bench", title_as_heading=title_as_heading)
    clean = settings.clean_markdown
    return {
        doc.doc_id: [embedding_text(chunk) for chunk in document_chunks(chunker, doc, clean=clean)]
        for doc in loaded
        if isinstance(doc, Document)
    }


def dataset_and_out_dir(root: Path, out_dir: Path | None, smoke: bool) -> tuple[BeirDataset, Path]:
    """The test split at `root` (checked) and the results folder (default: the
    committed results, or a scratch one for a smoke run, which measures its
    `smoke_subset` written there)."""
    dataset = BeirDataset(root)
    dataset.check()
    out_dir = out_dir or (SCRATCH_DIR / "smoke" if smoke else RESULTS_DIR)
    return (smoke_subset(dataset, out_dir) if smoke else dataset), out_dir


def smoke_subset(source: BeirDataset, out_dir: Path) -> BeirDataset:
    """What a smoke run measures: `source`'s first 20 judged queries and 40
    other documents, written under `out_dir`."""
    target = out_dir / f"{source.name}-smoke"
    return BeirDataset(write_subset(source, target, queries=20, filler_docs=40), source.split)


def write_subset(source: BeirDataset, target: Path, *, queries: int, filler_docs: int) -> Path:
    """A small BEIR folder: the first `queries` judged queries, every document
    judged for them, and `filler_docs` other documents so the search has
    something to reject. Used by the smoke runs."""
    chosen = dict(list(source.queries().items())[:queries])
    qrels = {q: docs for q, docs in source.qrels().items() if q in chosen}
    relevant = {doc for docs in qrels.values() for doc in docs}
    target.mkdir(parents=True, exist_ok=True)
    kept = 0
    with source.corpus.open(encoding="utf-8") as src, (target / "corpus.jsonl").open("w") as out:
        for line in src:
            if not line.strip():
                continue
            doc_id = str(json.loads(line)["_id"])
            if doc_id in relevant or kept < filler_docs:
                kept += doc_id not in relevant
                out.write(line.rstrip("\n") + "\n")
    write_judged_queries(target, source.split, chosen, qrels)
    return target


def write_query_subset(source: BeirDataset, target: Path, query_ids: set[str]) -> Path:
    """A BEIR folder with the whole corpus (linked, not copied) and only the
    queries in `query_ids`, with their judgments: a held-out part of a split."""
    chosen = {q: text for q, text in source.queries().items() if q in query_ids}
    qrels = {q: docs for q, docs in source.qrels().items() if q in chosen}
    target.mkdir(parents=True, exist_ok=True)
    corpus = target / "corpus.jsonl"
    corpus.unlink(missing_ok=True)
    corpus.symlink_to(source.corpus.resolve())
    write_judged_queries(target, source.split, chosen, qrels)
    return target


def write_judged_queries(target: Path, split: str, queries: dict[str, str], qrels: Qrels) -> None:
    with (target / f"queries-{split}.jsonl").open("w") as out:
        for query_id, text in queries.items():
            out.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    (target / "qrels").mkdir(exist_ok=True)
    with (target / "qrels" / f"{split}.tsv").open("w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query_id, docs in qrels.items():
            for doc_id, score in docs.items():
                out.write(f"{query_id}\t{doc_id}\t{score}\n")
