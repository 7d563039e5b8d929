"""`make eval`: retrieval quality through the real RPCs.

Starts the embedded stack (`python -m services.stack`) and a Reranker as
their own processes, ingests a BEIR corpus through the Indexer (exactly as
`python -m services.operator.cli ingest --format beir` does), sends every
query of the split through `Retrieve` once per configuration — lexical
only, vector only, hybrid (RRF), hybrid + rerank when a cross-encoder can
be loaded — and scores the answers at document level with ir-measures.
The peer (a Haystack hybrid pipeline, bench/peers/haystack_hybrid.py) is scored on
the same queries by the same code in the same run.

Writes bench/results/<dataset>.json and regenerates docs/benchmarks.md.
The index lives in .data/eval/<dataset>; a second run finds every document
unchanged and writes nothing, so it is fast.

    python -m bench.eval.scifact                                # SciFact test split
    python -m bench.eval.scifact --dataset PATH                 # any BEIR-layout folder
    python -m bench.eval.scifact --split train                  # for fitting; never report it
    python -m bench.eval.scifact --smoke --out /tmp/x           # 20 queries, ~60 documents

A full test-split run also measures hybrid on an index of its own whose
documents the Indexer encoded in int8 (RAG_EMBEDDING_DOCUMENT_PRECISION=int8;
queries are fp32 as always), and the fine-tuned model (bench.eval.finetune).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common.indexing import IngestReport, index_stats, ingest_beir
from bench.common.processes import Reranker, Stack
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import Answer, run_load
from bench.eval import finetune
from bench.eval.dataset import Qrels
from bench.eval.metrics import distinct_documents, evaluate
from bench.eval.peer import run_peer
from bench.eval.scifact_options import (
    CONFIGS,
    SCOPE,
    EvalOptions,
    check_document_encoders,
    index_dir,
    parse_args,
)
from bench.reports.page import write_report
from bench.reports.scifact import scifact_targets
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.embedding.config import MULTILINGUAL_MODEL as DEFAULT_EMBEDDING_MODEL


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv, __doc__ or "")
    record = run_record(["-m", "bench.eval.scifact", *argv])
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    measured = measure_project(opts)
    peer = run_peer(opts.dataset, opts.top_k) if opts.peer else {"not_measured": "--no-peer"}
    result = {
        "dataset": opts.dataset.name,
        "split": opts.dataset.split,
        **record,
        **measured,
        "peer": peer,
        "fit": fit_summary(opts.fit),
    }
    if opts.finetuned is not None:
        result["finetuned"] = measure_finetuned(opts)
    if opts.int8_documents and "hybrid" in opts.configs:
        result["int8_documents"] = measure_int8_documents(opts)
    if opts.compare_models:
        result["models"] = {model: measure_model(opts, model) for model in COMPARED_MODELS}
    result["targets"] = scifact_targets(result)
    split = "" if opts.dataset.split == "test" else f"-{opts.dataset.split}"
    path = opts.out_dir / f"{opts.dataset.name}{split}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    write_report(opts.out_dir, opts.docs_path)
    print_summary(result, path)
    return 0


def measure_project(opts: EvalOptions) -> dict[str, Any]:
    reranker = start_reranker(opts)
    serving = reranker.addr if reranker is not None and reranker.loaded else ""
    env = {**opts.stack_env, "RAG_RERANKER_ADDR": serving}
    stack = Stack.start(opts.data_dir, opts.log_dir, env)
    try:
        ingest = ingest_beir(
            stack.indexer_addr,
            opts.dataset.corpus,
            SCOPE,
            title_as_heading=opts.title_as_heading,
        )
        stats = index_stats(stack.indexer_addr)
        check_document_encoders(stats, opts)
        configs, not_measured = evaluate_configs(opts, stack.retriever_addr, reranker)
    finally:
        stack.stop()
        if reranker is not None:
            reranker.stop()
    return {
        "queries": len(opts.dataset.queries()),
        "chunking": chunking_section(opts, stats),
        "index": index_section(ingest, opts.dataset.qrels()),
        "request": request_section(opts),
        "configs": configs,
        "not_measured": not_measured,
    }


def measure_finetuned(opts: EvalOptions) -> dict[str, Any]:
    """Vector and hybrid again, with the model bench.eval.finetune fitted on the
    train split (the default one is trained first when missing), in an index
    of its own."""
    model = opts.finetuned or finetune.model_dir(opts.dataset.name)
    if model == finetune.model_dir(opts.dataset.name):
        finetune.ensure_model(opts.dataset.root)
    card = json.loads((model / finetune.CARD).read_text())
    variant = replace(
        opts,
        configs=("vector", "hybrid"),
        stack_env={**opts.stack_env, "RAG_EMBEDDING_MODEL": str(model)},
        data_dir=index_dir(opts.data_dir.parent, opts.dataset.name, opts.title_as_heading, model),
        finetuned=None,
    )
    validation = finetune.validation_file(opts.dataset.name)
    return {
        "model": str(model),
        "card": card,
        "validation": json.loads(validation.read_text()) if validation.is_file() else None,
        **measure_project(variant),
    }


def measure_int8_documents(opts: EvalOptions) -> dict[str, Any]:
    """Hybrid again, on an index of its own built by an Indexer that encodes
    documents in int8; queries go through the normal Retriever (fp32)."""
    variant = replace(
        opts,
        configs=("hybrid",),
        stack_env={**opts.stack_env, "RAG_EMBEDDING_DOCUMENT_PRECISION": "int8"},
        document_precision="int8",
        data_dir=index_dir(
            opts.data_dir.parent,
            opts.dataset.name,
            opts.title_as_heading,
            _embedding_model(opts),
            document_precision="int8",
        ),
        finetuned=None,
        int8_documents=False,
    )
    return measure_project(variant)


# Packaged models measured beside the served one, each in an index of its own:
# the other one of the two packaged models (the default is measured above).
COMPARED_MODELS = ("packaged:all-MiniLM-L6-v2", "packaged:multilingual-e5-small")


def measure_model(opts: EvalOptions, model: str) -> dict[str, Any]:
    """Lexical, vector and hybrid with `model` (skipped when it is the served one)."""
    served = opts.stack_env.get("RAG_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_MODEL
    if model == served:
        return {"served": True}
    slug = model.removeprefix("packaged:")
    variant = replace(
        opts,
        configs=tuple(c for c in ("vector", "hybrid") if c in opts.configs),
        stack_env={**opts.stack_env, "RAG_EMBEDDING_MODEL": model},
        data_dir=opts.data_dir.parent / f"{opts.data_dir.name}-{slug}",
        finetuned=None,
        int8_documents=False,
        compare_models=False,
    )
    return measure_project(variant)


def _embedding_model(opts: EvalOptions) -> Path | None:
    """The `--embedding-model` folder the stack runs, None for the packaged model."""
    model = opts.stack_env.get("RAG_EMBEDDING_MODEL")
    return Path(model) if model else None


def start_reranker(opts: EvalOptions) -> Reranker | None:
    """The Reranker with the configured model when "hybrid+rerank" is asked
    for; one whose model cannot be loaded is stopped at once (it keeps its
    reason, which the results report)."""
    if "hybrid+rerank" not in opts.configs:
        return None
    reranker = Reranker.start(opts.rerank_model, opts.log_dir)
    if not reranker.loaded:
        reranker.stop()
    return reranker


def evaluate_configs(
    opts: EvalOptions, addr: str, reranker: Reranker | None
) -> tuple[dict[str, Any], dict[str, str]]:
    queries = list(opts.dataset.queries().items())
    qrels = opts.dataset.qrels()
    configs: dict[str, Any] = {}
    not_measured: dict[str, str] = {}
    vector_weight, lexical_weight = opts.weights or (0.0, 0.0)
    weights = pb.ChannelWeights(vector=vector_weight, lexical=lexical_weight)
    for name, shape in CONFIGS.items():
        if name not in opts.configs:
            continue
        if name == "hybrid+rerank" and reranker is not None and not reranker.loaded:
            not_measured[name] = f"no cross-encoder loadable ({reranker.model}): {reranker.reason}"
            continue
        configs[name] = measure_config(opts, addr, queries, qrels, **shape, weights=weights)
    return configs, not_measured


def measure_config(
    opts: EvalOptions, addr: str, queries: list[tuple[str, str]], qrels: Qrels, **shape: Any
) -> dict[str, Any]:
    """One request shape over `queries`, after one of them as a warm-up, scored."""

    def make_request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text,
            top_k=opts.top_k,
            max_chunks_per_document=1,
            candidates_per_channel=opts.depth,
            filter=pb.ScopeFilter(scope_id=SCOPE),
            **shape,
        )

    run_load(addr, queries[:1], make_request)
    load = run_load(addr, queries, make_request, timeout_s=300)
    return score_config(load.answers, qrels, load.errors)


def score_config(answers: list[Answer], qrels: Qrels, errors: dict[str, int]) -> dict[str, Any]:
    run = {
        a.query_id: distinct_documents([h.doc_id for h in a.response.hits])
        for a in answers
        if a.response is not None
    }
    degraded = sum(1 for a in answers if a.response is not None and a.response.degraded)
    return {
        **evaluate(qrels, run),
        "latency": latency_summary([a.latency_ms for a in answers if a.response is not None]),
        "errors": errors,
        "degraded_responses": degraded,
    }


def fit_summary(fit: dict[str, Any] | None) -> dict[str, Any] | None:
    """Which train-split fit chose the settings used here, and its grid."""
    if fit is None:
        return None
    keys = ("command", "date", "git_revision", "split", "objective", "chosen")
    grid = [
        {
            "lexical_boosts": point["lexical_boosts"],
            "lexical_ndcg@10": point["lexical"]["ndcg@10"],
            "hybrid_ndcg@10": point["hybrid"]["ndcg@10"],
        }
        for point in fit["grid"]
    ]
    return {**{k: fit[k] for k in keys}, "grid": grid}


def chunking_section(opts: EvalOptions, stats: dict[str, Any]) -> dict[str, Any]:
    return {
        **stats["chunking"],
        "title_as_heading": opts.title_as_heading,
        "documents": int(stats["documents"]),
        "chunks": int(stats["chunks"]),
        "embedding_model": stats["embedding_model"],
        "document_encoders": stats.get("document_encoders", []),
        "vector_backend": stats["vector_backend"],
        "lexical_backend": stats["lexical_backend"],
    }


def index_section(ingest: IngestReport, qrels: Qrels) -> dict[str, Any]:
    """How this run's ingest went (a reused index wrote nothing), and which
    documents the Indexer refused, with how many judgments point at them."""
    refused = {line.split(":", 1)[0]: line for line in ingest.rejected}
    section: dict[str, Any] = {
        "reused": ingest.reused,
        "seconds": ingest.seconds,
        "counts": ingest.counts,
        "rejected": sorted(refused.values()),
        "judgments_on_rejected": sum(doc in refused for docs in qrels.values() for doc in docs),
    }
    if not ingest.reused and ingest.seconds > 0:
        section["docs_per_s"] = round(ingest.documents / ingest.seconds, 2)
        section["chunks_per_s"] = round(ingest.counts["chunks_to_embed"] / ingest.seconds, 2)
    return section


def request_section(opts: EvalOptions) -> dict[str, Any]:
    return {
        "top_k": opts.top_k,
        "max_chunks_per_document": 1,
        "candidates_per_channel": opts.depth,
        "server_settings": opts.stack_env,
        "weights": {"vector": opts.weights[0], "lexical": opts.weights[1]}
        if opts.weights
        else "server default (1, 1)",
        "why": (
            "one chunk per document, so top_k hits are top_k distinct documents, each at "
            "its best chunk's rank (the per-document cap only drops a document's later "
            "chunks, so the document order is the same as with the default cap of 2); "
            f"{opts.depth} chunks per channel so even one channel alone yields "
            f"{opts.top_k} distinct documents for Recall@{opts.top_k}"
        ),
    }


def print_summary(result: dict[str, Any], path: Path) -> None:
    index = result["index"]
    print(f"index: {'reused' if index['reused'] else 'built'} in {index['seconds']} s")
    finetuned = result.get("finetuned", {}).get("configs", {})
    int8 = result.get("int8_documents", {}).get("configs", {})
    rows = [
        *result["configs"].items(),
        *((f"{n} (fine-tuned)", v) for n, v in finetuned.items()),
        *((f"{n} (int8 docs)", v) for n, v in int8.items()),
    ]
    for name, values in rows:
        figures = ", ".join(f"{k}={v}" for k, v in values.items() if "@" in k)
        print(f"{name:14} {figures}  p50={values['latency']['p50_ms']} ms")
    for name, reason in result["not_measured"].items():
        print(f"{name:14} not measured: {reason}")
    peer = result["peer"]
    if "metrics" in peer:
        print(f"{'peer':14} {peer['metrics']}  p50={peer['latency']['p50_ms']} ms")
    else:
        print(f"{'peer':14} not measured: {peer['not_measured']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
