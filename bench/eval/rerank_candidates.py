"""`python -m bench.eval.rerank_candidates`: the fused candidates a Reranker
would see, kept on disk for fitting and comparing rerank rules offline.

Starts the embedded stack without a Reranker, ingests a BEIR corpus (or
reuses the index `bench.eval.scifact` built), sends every query of a split
through `Retrieve` (hybrid, rerank off, one chunk per document) and writes one
JSON line per query: its id, text and the first `--top-k` hits in fused order
(doc_id, title, text, fused_score). `bench.eval.rerank_fit` scores these with
the cross-encoder and fits the combination rule on the train split only.

    python -m bench.eval.rerank_candidates --split train
    python -m bench.eval.rerank_candidates --split test
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from bench.common.indexing import ingest_beir
from bench.common.paths import EVAL_DATA, SCRATCH_DIR, SHARED_DATASETS
from bench.common.processes import Stack
from bench.common.retrieve_loop import run_load
from bench.eval.dataset import BeirDataset, write_judged_queries
from bench.eval.scifact_options import SCOPE, index_dir
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

CANDIDATES_DIR = SCRATCH_DIR / "rerank"


def candidates_file(dataset: str, split: str) -> Path:
    return CANDIDATES_DIR / f"{dataset}-{split}-candidates.jsonl"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.eval.rerank_candidates", description=__doc__)
    p.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    p.add_argument("--split", nargs="+", default=["train", "test"])
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument(
        "--queries", type=int, default=0, help="per split, chosen by sha1 of the id (0: all)"
    )
    p.add_argument("--filler-docs", type=int, default=500, help="with --queries: unjudged docs")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    splits = [BeirDataset(args.dataset, split) for split in args.split]
    for dataset in splits:
        dataset.check()
    data_dir = index_dir(EVAL_DATA, splits[0].name, False, None)
    if args.queries:
        root = write_split_subsets(splits, CANDIDATES_DIR / splits[0].name, args)
        splits = [BeirDataset(root, split) for split in args.split]
        data_dir = EVAL_DATA / f"{root.name}-rerank-subset"
    # One model cache for every index: building the ONNX graph takes minutes.
    # fp32 documents, as the folder's name says (bench.eval.scifact_options.index_dir).
    models = {
        "RAG_EMBEDDING_CACHE_DIR": str(EVAL_DATA / "models"),
        "RAG_EMBEDDING_DOCUMENT_PRECISION": "fp32",
    }
    stack = Stack.start(data_dir, CANDIDATES_DIR / "logs", models)
    try:
        ingest_beir(stack.indexer_addr, splits[0].corpus, SCOPE, title_as_heading=False)
        for dataset in splits:
            rows = fused_candidates(stack.retriever_addr, dataset, args.top_k)
            path = candidates_file(dataset.name, dataset.split)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
            print(f"{len(rows)} queries -> {path}")
    finally:
        stack.stop()
    return 0


def write_split_subsets(splits: list[BeirDataset], target: Path, args: argparse.Namespace) -> Path:
    """A BEIR folder holding, per split, `args.queries` queries (the lowest
    sha1 of their ids: no choice by content), every document judged for them
    and `args.filler_docs` unjudged ones: an index this machine can build in
    minutes rather than hours."""
    relevant: set[str] = set()
    for dataset in splits:
        ids = sorted(dataset.queries(), key=lambda q: hashlib.sha1(q.encode()).hexdigest())
        chosen = set(ids[: args.queries])
        queries = {q: text for q, text in dataset.queries().items() if q in chosen}
        qrels = {q: docs for q, docs in dataset.qrels().items() if q in chosen}
        relevant |= {doc for docs in qrels.values() for doc in docs}
        target.mkdir(parents=True, exist_ok=True)
        write_judged_queries(target, dataset.split, queries, qrels)
    kept = 0
    with splits[0].corpus.open(encoding="utf-8") as src, (target / "corpus.jsonl").open("w") as out:
        for line in src:
            if not line.strip():
                continue
            doc_id = str(json.loads(line)["_id"])
            if doc_id in relevant or kept < args.filler_docs:
                kept += doc_id not in relevant
                out.write(line.rstrip("\n") + "\n")
    return target


def fused_candidates(addr: str, dataset: BeirDataset, top_k: int) -> list[dict[str, Any]]:
    queries = list(dataset.queries().items())

    def make_request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text,
            top_k=top_k,
            max_chunks_per_document=1,
            filter=pb.ScopeFilter(scope_id=SCOPE),
            disable_rerank=True,
        )

    load = run_load(addr, queries, make_request, timeout_s=300)
    texts = dict(queries)
    return [
        {
            "query_id": answer.query_id,
            "query": texts[answer.query_id],
            "hits": [
                {"doc_id": h.doc_id, "title": h.title, "text": h.text, "fused": h.fused_score}
                for h in answer.response.hits
            ],
        }
        for answer in load.answers
        if answer.response is not None
    ]


if __name__ == "__main__":
    raise SystemExit(main())
