"""`make eval`: retrieval quality through the real RPCs.

Starts the embedded stack (`python -m services.stack`) and a Reranker as
their own processes, ingests a BEIR corpus through the Indexer (exactly as
`python -m services.indexer.cli ingest --format beir` does), sends every
query of the split through `Retrieve` once per configuration — lexical
only, vector only, hybrid (RRF), hybrid + rerank when a cross-encoder can
be loaded — and scores the answers at document level with ir-measures.
The peer (a Haystack hybrid pipeline, bench/peer_haystack.py) is scored on
the same queries by the same code in the same run.

Writes bench/results/<dataset>.json and regenerates docs/benchmarks.md.
The index lives in .data/eval/<dataset>; a second run finds every document
unchanged and writes nothing, so it is fast.

    python -m bench.eval                                # SciFact test split
    python -m bench.eval --dataset PATH                 # any BEIR-layout folder
    python -m bench.eval --split train                  # for fitting; never report it
    python -m bench.eval --smoke --out /tmp/x           # 20 queries, ~60 documents
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.dataset import BeirDataset, Qrels, write_subset
from bench.harness import (
    BENCHMARKS_MD,
    EVAL_DATA,
    RESULTS_DIR,
    SCRATCH_DIR,
    SHARED_DATASETS,
    IngestReport,
    Reranker,
    Stack,
    index_stats,
    ingest_beir,
    latency_summary,
    run_record,
)
from bench.load import Answer, run_load
from bench.metrics import distinct_documents, evaluate
from bench.peer import run_peer
from bench.report import write_report
from bench.targets import HYBRID_NDCG, HYBRID_NDCG_AIM
from services.common.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.reranker.settings import DEFAULT_MODEL

# Request shape per configuration; every one is sent with the same depth.
CONFIGS: dict[str, dict[str, Any]] = {
    "lexical": {"channels": [pb.CHANNEL_LEXICAL], "disable_rerank": True},
    "vector": {"channels": [pb.CHANNEL_VECTOR], "disable_rerank": True},
    "hybrid": {"disable_rerank": True},
    "hybrid+rerank": {"disable_rerank": False},
}
SCOPE = "eval"
BOOST_FIELDS = ("title", "heading_path", "text")
BOOST_VARIABLES = ("RAG_LEXICAL_TITLE_BOOST", "RAG_LEXICAL_HEADING_BOOST", "RAG_LEXICAL_TEXT_BOOST")


@dataclass(frozen=True)
class EvalOptions:
    dataset: BeirDataset
    out_dir: Path
    docs_path: Path
    data_dir: Path
    top_k: int
    depth: int
    title_as_heading: bool
    rerank_model: str
    peer: bool
    stack_env: dict[str, str]
    log_dir: Path
    weights: tuple[float, float] | None = None  # (vector, lexical); None: server default
    configs: tuple[str, ...] = tuple(CONFIGS)
    fit: dict[str, Any] | None = None  # bench.fit's record, when its settings are used


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv)
    record = run_record(["-m", "bench.eval", *argv])
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
    result["targets"] = assess(result)
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
    warm_up = queries[:1]
    vector_weight, lexical_weight = opts.weights or (0.0, 0.0)
    for name, shape in CONFIGS.items():
        if name not in opts.configs:
            continue
        if name == "hybrid+rerank" and reranker is not None and not reranker.loaded:
            not_measured[name] = f"no cross-encoder loadable ({reranker.model}): {reranker.reason}"
            continue

        def make_request(text: str, shape: dict[str, Any] = shape) -> pb.RetrieveRequest:
            return pb.RetrieveRequest(
                query=text,
                top_k=opts.top_k,
                max_chunks_per_document=1,
                candidates_per_channel=opts.depth,
                filter=pb.ScopeFilter(scope_id=SCOPE),
                weights=pb.ChannelWeights(vector=vector_weight, lexical=lexical_weight),
                **shape,
            )

        run_load(addr, warm_up, make_request)
        load = run_load(addr, queries, make_request, timeout_s=300)
        configs[name] = score_config(load.answers, qrels, load.errors)
    return configs, not_measured


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


def assess(result: dict[str, Any]) -> list[dict[str, Any]]:
    hybrid = result["configs"].get("hybrid", {}).get("ndcg@10")
    note = f"{result['dataset']} {result['split']} split"
    return [HYBRID_NDCG.assess(hybrid, note), HYBRID_NDCG_AIM.assess(hybrid, note)]


def print_summary(result: dict[str, Any], path: Path) -> None:
    index = result["index"]
    print(f"index: {'reused' if index['reused'] else 'built'} in {index['seconds']} s")
    for name, values in result["configs"].items():
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


def parse_args(argv: list[str]) -> EvalOptions:
    p = argparse.ArgumentParser(
        prog="python -m bench.eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--dataset",
        type=Path,
        default=SHARED_DATASETS / "scifact",
        help="BEIR-layout folder (corpus.jsonl, queries, qrels/)",
    )
    p.add_argument("--split", default="test", help="qrels split to score (test; train to fit)")
    p.add_argument("--smoke", action="store_true", help="20 queries and ~60 documents")
    p.add_argument("--out", type=Path, help="results folder (default bench/results)")
    p.add_argument("--docs", type=Path, help="Markdown report (default docs/benchmarks.md)")
    p.add_argument("--data-dir", type=Path, help="index folder (default .data/eval/<name>)")
    p.add_argument("--top-k", type=int, default=100)
    p.add_argument("--depth", type=int, default=300, help="candidates per channel (chunks)")
    p.add_argument(
        "--no-title-as-heading",
        dest="title_as_heading",
        action="store_false",
        help="index the title in the title field only (not embedded)",
    )
    p.add_argument("--rerank-model", default=DEFAULT_MODEL)
    p.add_argument("--no-peer", dest="peer", action="store_false")
    p.add_argument("--rrf-k", type=int, help="server RRF k (fit on train only)")
    p.add_argument("--weights", help="VECTOR,LEXICAL channel weights (fit on train only)")
    p.add_argument(
        "--lexical-boosts", help="TITLE,HEADING,TEXT BM25 field boosts (fit on train only)"
    )
    p.add_argument("--configs", help=f"comma-separated subset of {','.join(CONFIGS)}")
    p.add_argument("--no-fit", action="store_true", help="ignore bench/results/<dataset>-fit.json")
    args = p.parse_args(argv)
    return _options(args)


def _options(args: argparse.Namespace) -> EvalOptions:
    dataset = BeirDataset(args.dataset, args.split)
    dataset.check()
    # Only test-split results belong in the committed record.
    scratch = args.smoke or args.split != "test"
    where = "smoke" if args.smoke else args.split
    out_dir = args.out or (SCRATCH_DIR / where if scratch else RESULTS_DIR)
    if args.smoke:
        dataset = BeirDataset(
            write_subset(dataset, out_dir / f"{dataset.name}-smoke", queries=20, filler_docs=40),
            args.split,
        )
    variant = "" if args.title_as_heading else "-plain"
    default_data = (out_dir / "data") if args.smoke else EVAL_DATA
    env = {
        "RAG_MAX_TOP_K": str(args.top_k),
        # Every request embeds its query, so per-query latencies are comparable.
        "RAG_QUERY_CACHE_SIZE": "0",
        "RAG_MAX_CANDIDATES_PER_CHANNEL": str(max(args.depth, 200)),
        # A real cross-encoder gets time to score every candidate: this measures quality.
        "RAG_RERANK_BUDGET_MS": "60000",
    }
    if args.rrf_k:
        env["RAG_RRF_K"] = str(args.rrf_k)
    fit = None if args.no_fit or args.lexical_boosts else load_fit(dataset.name)
    boosts = args.lexical_boosts.split(",") if args.lexical_boosts else []
    if fit is not None:
        boosts = [f"{fit['chosen']['lexical_boosts'][field]:g}" for field in BOOST_FIELDS]
    env.update(zip(BOOST_VARIABLES, boosts, strict=False))
    return EvalOptions(
        dataset=dataset,
        out_dir=out_dir,
        docs_path=args.docs or (out_dir / "benchmarks.md" if scratch else BENCHMARKS_MD),
        data_dir=args.data_dir or default_data / f"{dataset.name}{variant}",
        top_k=args.top_k,
        depth=args.depth,
        title_as_heading=args.title_as_heading,
        rerank_model=args.rerank_model,
        peer=args.peer,
        stack_env=env,
        log_dir=(out_dir if scratch else SCRATCH_DIR) / "logs" / "eval",
        weights=_weights(args.weights),
        configs=tuple(args.configs.split(",")) if args.configs else tuple(CONFIGS),
        fit=fit,
    )


def fit_file(dataset_name: str) -> Path:
    """Where `bench.fit` records the settings it fitted on the train split."""
    return RESULTS_DIR / f"{dataset_name}-fit.json"


def load_fit(dataset_name: str) -> dict[str, Any] | None:
    path = fit_file(dataset_name)
    return json.loads(path.read_text()) if path.is_file() else None


def _weights(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    vector, lexical = (float(part) for part in text.split(","))
    return vector, lexical


if __name__ == "__main__":
    sys.exit(main())
