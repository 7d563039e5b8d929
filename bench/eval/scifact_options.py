"""The options of `python -m bench.eval.scifact`: what to index, which request
configurations to send, which fitted settings (BM25 boosts, a fine-tuned
embedding model) to use, and where results and indexes go."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import BENCHMARKS_MD, EVAL_DATA, RESULTS_DIR, SCRATCH_DIR, SHARED_DATASETS
from bench.eval import finetune
from bench.eval.dataset import BeirDataset, smoke_subset
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.reranker.settings import DEFAULT_MODEL

# Request shape per configuration; every one is sent with the same depth.
CONFIGS: dict[str, dict[str, Any]] = {
    "lexical": {"channels": [pb.CHANNEL_LEXICAL], "disable_rerank": True},
    "vector": {"channels": [pb.CHANNEL_VECTOR], "disable_rerank": True},
    "hybrid": {"disable_rerank": True},
    # Score fusion next to RRF (the default is chosen by these on train).
    "hybrid-min_max": {
        "disable_rerank": True,
        "fusion": pb.Fusion(method=pb.FUSION_METHOD_MIN_MAX),
    },
    "hybrid-dbsf": {"disable_rerank": True, "fusion": pb.Fusion(method=pb.FUSION_METHOD_DBSF)},
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
    fit: dict[str, Any] | None = None  # bench.eval.fit's record, when its settings are used
    # Also measure this model made by bench.eval.finetune (vector and hybrid, own index).
    finetuned: Path | None = None
    # Also measure hybrid with documents encoded in int8 (own index), queries in fp32.
    int8_documents: bool = False
    compare_models: bool = False
    # The precision the index's documents are encoded in, by the rows' own
    # statement: checked against the encoders the index records.
    document_precision: str = "fp32"


def index_dir(
    parent: Path,
    dataset_name: str,
    title_as_heading: bool,
    model: Path | None,
    document_precision: str = "fp32",
) -> Path:
    """One index per corpus, loader variant, embedding model (a fitted model
    by its weights, so a re-trained one starts a fresh index) and document
    precision (an int8 index is compared with the fp32 one, never mixed with it)."""
    variant = "" if title_as_heading else "-plain"
    weights = f"-{finetune.weights_file_sha256(model)}" if model else ""
    precision = "" if document_precision == "fp32" else f"-{document_precision}"
    return parent / f"{dataset_name}{variant}{weights}{precision}"


def parse_args(argv: list[str], description: str) -> EvalOptions:
    p = argparse.ArgumentParser(
        prog="python -m bench.eval.scifact",
        description=description,
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
    p.add_argument(
        "--embedding-model",
        type=Path,
        help="a sentence-transformers folder to index and query with instead of the packaged one",
    )
    p.add_argument(
        "--no-finetuned",
        dest="finetuned",
        action="store_false",
        help="skip the model fitted on the train split (bench.eval.finetune)",
    )
    p.add_argument(
        "--finetuned-model",
        type=Path,
        help="the bench.eval.finetune model to measure next to the packaged one (default: the "
        "dataset's, trained when missing; full test-split runs only)",
    )
    p.add_argument(
        "--int8-documents",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also measure hybrid on an index whose documents were encoded in int8 "
        "(RAG_EMBEDDING_DOCUMENT_PRECISION=int8, own index; default: full test-split runs only)",
    )
    p.add_argument(
        "--compare-models",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also measure vector and hybrid with the other packaged embedding model (own "
        "index each; default: full test-split runs only)",
    )
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
        dataset = smoke_subset(dataset, out_dir)
    default_data = (out_dir / "data") if args.smoke else EVAL_DATA
    env = {
        "RAG_MAX_TOP_K": str(args.top_k),
        # Every request embeds its query, so per-query latencies are comparable.
        "RAG_QUERY_CACHE_SIZE": "0",
        "RAG_MAX_CANDIDATES_PER_CHANNEL": str(max(args.depth, 200)),
        # A real cross-encoder gets time to score every candidate: this measures quality.
        "RAG_RERANK_BUDGET_MS": "60000",
    }
    if args.embedding_model:
        env["RAG_EMBEDDING_MODEL"] = str(args.embedding_model.resolve())
    if args.rrf_k:
        env["RAG_RRF_K"] = str(args.rrf_k)
    fit = None if args.no_fit or args.lexical_boosts else load_fit(dataset.name)
    boosts = args.lexical_boosts.split(",") if args.lexical_boosts else []
    if fit is not None:
        boosts = [f"{fit['chosen']['lexical_boosts'][field]:g}" for field in BOOST_FIELDS]
    env.update(zip(BOOST_VARIABLES, boosts, strict=False))
    int8_documents = not scratch if args.int8_documents is None else args.int8_documents
    # The rows run at a stated document precision, fp32 unless the caller's
    # environment sets one, never at what `auto` picks on this CPU: the index
    # folder is named by it, and the `hybrid` row is the fp32 reference the
    # int8 row is compared with, with or without that row.
    precision = os.environ.get("RAG_EMBEDDING_DOCUMENT_PRECISION", "fp32")
    env["RAG_EMBEDDING_DOCUMENT_PRECISION"] = precision
    int8_documents = int8_documents and precision == "fp32"  # else it has no reference
    return EvalOptions(
        dataset=dataset,
        out_dir=out_dir,
        docs_path=args.docs or (out_dir / "benchmarks.md" if scratch else BENCHMARKS_MD),
        data_dir=args.data_dir
        or index_dir(
            default_data, dataset.name, args.title_as_heading, args.embedding_model, precision
        ),
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
        finetuned=_finetuned_model(args, dataset.name, scratch),
        int8_documents=int8_documents,
        compare_models=not scratch if args.compare_models is None else args.compare_models,
        document_precision=precision,
    )


def _finetuned_model(args: argparse.Namespace, dataset_name: str, scratch: bool) -> Path | None:
    if not args.finetuned or args.embedding_model:
        return None
    if args.finetuned_model is None:
        return None if scratch else finetune.model_dir(dataset_name)
    model = args.finetuned_model.resolve()
    if not (model / finetune.CARD).is_file():
        raise SystemExit(
            f"--finetuned-model {model}: no {finetune.CARD} (bench.eval.finetune makes it)"
        )
    return model


def fit_file(dataset_name: str) -> Path:
    """Where `bench.eval.fit` records the settings it fitted on the train split."""
    return RESULTS_DIR / f"{dataset_name}-fit.json"


def load_fit(dataset_name: str) -> dict[str, Any] | None:
    path = fit_file(dataset_name)
    return json.loads(path.read_text()) if path.is_file() else None


def _weights(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    vector, lexical = (float(part) for part in text.split(","))
    return vector, lexical


def check_document_encoders(stats: dict[str, Any], opts: EvalOptions) -> None:
    """Stop before measuring when the index's recorded document encoders
    (`Stats.document_encoders`, e.g. `onnx-int8`) are not all of the precision
    the rows state: a reused index keeps the vectors it was built with, so an
    fp32 row over an int8-built folder would report int8 figures as fp32."""
    encoders = list(stats.get("document_encoders") or [])
    stated = opts.document_precision
    if stated == "auto" or not encoders:
        return
    other = [name for name in encoders if not name.endswith(f"-{stated}")]
    if other:
        raise SystemExit(
            f"{opts.data_dir}: its documents were encoded by {', '.join(encoders)}, but this "
            f"run states {stated} (RAG_EMBEDDING_DOCUMENT_PRECISION): delete the folder to "
            "rebuild it, or pass --data-dir"
        )
