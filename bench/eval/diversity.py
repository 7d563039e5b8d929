"""`python -m bench.eval.diversity`: what MMR (`diversity.mmr_lambda`) does to
redundancy and to quality, through the real Retrieve RPC.

On the SciFact test split (the index `make eval` builds), every query is sent
once per λ with up to 3 chunks per document, so passages of one paper can
crowd the top 10. For each λ: nDCG@10 on the distinct documents of the top
10 (ir-measures, as `make eval`), distinct documents among the top 10
chunks, and the mean pairwise cosine of the top 10 chunk texts, embedded
by a second model (all-MiniLM-L6-v2, not the e5 model MMR uses, so the
measure is not the objective itself).

    python -m bench.eval.diversity                 # writes bench/results/diversity.json
    python -m bench.eval.diversity --smoke --out /tmp/x   # 20 queries, ~60 documents
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np

from bench.common.indexing import ingest_beir
from bench.common.paths import SCRATCH_DIR
from bench.common.processes import Stack
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import Answer, run_load
from bench.eval.metrics import distinct_documents, evaluate
from bench.eval.scifact_options import SCOPE, parse_args
from bench.reports.diversity import RESULTS_FILE
from bench.reports.page import publish
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.embedding.config import PACKAGED_MODEL, EmbedderConfig
from services.embedding.embedder import Embedder

LAMBDAS = (0.0, 0.9, 0.7, 0.5)
MODEL_CACHE = SCRATCH_DIR / "models"  # the judge's ONNX export, made once
TOP = 10
CHUNKS_PER_DOCUMENT = 3


def main(argv: list[str] | None = None) -> int:
    """Takes `bench.eval.scifact`'s options (--smoke, --out, --docs, --data-dir, ...)."""
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(["--no-peer", *argv], __doc__ or "")
    smoke = "--smoke" in argv
    record = run_record(["-m", "bench.eval.diversity", *argv])
    stack = Stack.start(opts.data_dir, opts.log_dir, {**opts.stack_env, "RAG_RERANKER_ADDR": ""})
    try:
        ingest_beir(
            stack.indexer_addr, opts.dataset.corpus, SCOPE, title_as_heading=opts.title_as_heading
        )
        queries = list(opts.dataset.queries().items())
        answers = {lam: _answers(stack.retriever_addr, queries, lam) for lam in LAMBDAS}
    finally:
        stack.stop()
    judge = _Judge(Embedder(EmbedderConfig(model=PACKAGED_MODEL, onnx_cache_dir=MODEL_CACHE)))
    qrels = opts.dataset.qrels()
    rows = [_measure(lam, found, qrels, judge) for lam, found in answers.items()]
    result = {
        **record,
        "dataset": opts.dataset.name,
        "split": opts.dataset.split,
        "queries": len(queries),
        "chunks_per_document": CHUNKS_PER_DOCUMENT,
        "rows": rows,
    }
    name = "diversity-smoke.json" if smoke else RESULTS_FILE
    publish(result, opts.out_dir / name, None if smoke else opts.docs_path, RESULTS_FILE)
    for row in rows:
        print(row)
    return 0


def _answers(addr: str, queries: list[tuple[str, str]], lam: float) -> list[Answer]:
    def request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text,
            top_k=TOP,
            max_chunks_per_document=CHUNKS_PER_DOCUMENT,
            disable_rerank=True,
            filter=pb.ScopeFilter(scope_id=SCOPE),
            diversity=pb.Diversity(mmr_lambda=lam),
        )

    run_load(addr, queries[:1], request)
    return run_load(addr, queries, request, timeout_s=300).answers


class _Judge:
    """The second model's vectors, each distinct text embedded once (the
    same passages come back under several λ), in batches."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder, self.by_text = embedder, dict[str, np.ndarray]()

    def similarity(self, texts: list[str]) -> float:
        """Mean pairwise cosine of `texts` (nan for fewer than two)."""
        if len(texts) < 2:
            return float("nan")
        rows = np.stack([self.by_text[text] for text in texts])
        pairs = list(itertools.combinations(range(len(texts)), 2))
        return float(np.mean([float(rows[i] @ rows[j]) for i, j in pairs]))

    def embed_all(self, texts: set[str]) -> None:
        todo = sorted(texts - self.by_text.keys())
        for start in range(0, len(todo), 256):
            batch = todo[start : start + 256]
            self.by_text.update(zip(batch, self.embedder.embed_documents(batch), strict=True))


def _measure(lam: float, answers: list[Answer], qrels: Any, judge: _Judge) -> dict[str, Any]:
    replies = [a for a in answers if a.response is not None]
    run = {a.query_id: distinct_documents([h.doc_id for h in a.response.hits]) for a in replies}  # type: ignore[union-attr]
    distinct = [len({h.doc_id for h in a.response.hits}) for a in replies]  # type: ignore[union-attr]
    judge.embed_all({h.text for a in replies for h in a.response.hits})  # type: ignore[union-attr]
    similarity = [judge.similarity([h.text for h in a.response.hits]) for a in replies]  # type: ignore[union-attr]
    return {
        "mmr_lambda": lam,
        "ndcg@10": evaluate(qrels, run).get("ndcg@10"),
        "distinct_documents_top10": round(float(np.mean(distinct)), 3),
        "mean_pairwise_cosine_top10": round(float(np.nanmean(similarity)), 4),
        "latency": latency_summary([a.latency_ms for a in replies]),
        "errors": len(answers) - len(replies),
    }


if __name__ == "__main__":
    raise SystemExit(main())
