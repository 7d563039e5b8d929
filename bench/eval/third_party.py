"""`make eval-third-party`: developer questions over real third-party documentation.

The questions (bench/datasets/third_party/queries.jsonl) are written without
the answer's own identifiers ("freeze some arguments of a function" for
`functools.partial`), so they measure what a new user meets: the vocabulary
gap between a question and the page that answers it. The pages are the
corpus suite's (scripts/fetch_doc_corpus.py: the Python reference, git's
manual, npm's docs and READMEs), staged in a cache outside the clone and
fetched when missing.

The index holds every judged page and a deterministic sample of the others
(`--pages`, default 300 in all), copied into a scratch folder with their paths
kept and synced into one scope through the Indexer of an embedded stack
started as its own process. Every query goes through `Retrieve` as lexical
only, vector only, hybrid (reranking off) and, when a Reranker serves
(`--rerank-model`, default the Reranker's own default model; `--no-rerank`),
hybrid + rerank. Scored at document level (top 10, one chunk per document):
hit@1, top 3, MRR@10, nDCG@10, per split; the test split is the figure of
record (the train split is for fitting rules and weights).

`--renderings text` indexes the same pages, but each that has a plain-text
source beside its HTML (the Python reference's reST, git's AsciiDoc) as that
source, under the HTML page's id so the judgments hold: the questions over
documentation as its sources are written. `--renderings every` stages each
chosen page's other renderings beside it (the reST and AsciiDoc sources, npm's
generated HTML), as a documentation package holds them, and loads the folder
as `ingest` does (one document per page, bench/results/notes/renderings.md);
`every-file` loads every file (`ingest --all-renderings`), so both copies
compete, judged as the page a reader opens.

    python -m bench.eval.third_party
    python -m bench.eval.third_party --no-rerank --env RAG_FUSION=dbsf --out /tmp/x
    python -m bench.eval.third_party --renderings text --no-rerank --out /tmp/text
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.common.indexing import index_stats, sync_documents
from bench.common.paths import (
    BENCHMARKS_MD,
    DATASETS_DIR,
    EVAL_DATA,
    RESULTS_DIR,
    SCRATCH_DIR,
)
from bench.common.processes import Stack, start_reranker
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import run_load
from bench.eval.bilingual import index_dir, parse_env
from bench.eval.metrics import distinct_documents, evaluate
from bench.eval.third_party_data import (
    SPLITS,
    DocQuery,
    corpus_listing,
    distractors,
    one_rendering,
    other_renderings,
    qrels,
    read_queries,
    staged_subset,
    text_source,
)
from bench.reports.page import write_report
from bench.reports.targets import THIRD_PARTY_HIT1
from bench.reports.third_party import RESULTS_FILE
from scripts.fetch_doc_corpus import corpus_dir, ensure_corpus, pages_dir
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.models import Document
from services.reranker.settings import DEFAULT_MODEL as DEFAULT_RERANK_MODEL

SCOPE = "third-party-docs"
BASE_URL = "https://docs.example/third-party/"  # as the corpus suite loads it
TOP_K = 10
RERANKED = "hybrid+rerank"
CONFIGS: dict[str, dict[str, Any]] = {
    "lexical": {"channels": [pb.CHANNEL_LEXICAL], "disable_rerank": True},
    "vector": {"channels": [pb.CHANNEL_VECTOR], "disable_rerank": True},
    "hybrid": {"disable_rerank": True},
    RERANKED: {"disable_rerank": False},
}
# Distractors larger than this are left out: a few huge pages would cost most
# of the embedding time on 2 cores and add little variety.
MAX_DISTRACTOR_BYTES = 20_000


@dataclass(frozen=True)
class Options:
    queries_path: Path
    pages: int
    rerank_model: str  # "" when --no-rerank
    env: dict[str, str]
    out_dir: Path
    docs_path: Path
    data_dir: Path
    stage_dir: Path
    log_dir: Path
    # or "text": plain-text sources in place of their HTML; "every" / "every-file":
    # the other renderings beside them, loaded as ingest does / every file loaded
    renderings: str = "as-found"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv)
    record = run_record(["-m", "bench.eval.third_party", *argv])
    queries = read_queries(opts.queries_path)
    documents, selection = load_selection(opts, queries)
    index, configs, not_measured = measure(opts, documents, queries)
    result = {
        **record,
        "dataset": str(opts.queries_path.parent.name),
        "env": opts.env,
        # RAG_* variables of the calling shell reach the stack too: recorded, not hidden.
        "inherited_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("RAG_")},
        "selection": selection,
        "renderings": opts.renderings,
        "index": index,
        "request": {"top_k": TOP_K, "max_chunks_per_document": 1, "scope_id": SCOPE},
        "queries": {split: sum(q.split == split for q in queries) for split in SPLITS},
        "configs": configs,
        "not_measured": not_measured,
        "targets": assess(configs),
    }
    path = opts.out_dir / RESULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    write_report(opts.out_dir, opts.docs_path)
    print_summary(result, path)
    return 0


def parse_args(argv: list[str]) -> Options:
    p = argparse.ArgumentParser(
        prog="python -m bench.eval.third_party",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--queries", type=Path, default=DATASETS_DIR / "third_party" / "queries.jsonl")
    p.add_argument("--pages", type=int, default=300, help="pages in the index, judged included")
    p.add_argument("--rerank-model", default=DEFAULT_RERANK_MODEL)
    p.add_argument("--no-rerank", action="store_true", help="measure without a Reranker")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--renderings",
        choices=("as-found", "text", "every", "every-file"),
        default="as-found",
        help="text: index reST / AsciiDoc sources in place of their HTML (same doc ids); "
        "every: stage the other renderings too, loaded as ingest does; every-file: every "
        "file loaded (ingest --all-renderings)",
    )
    p.add_argument("--out", type=Path, help="results folder (default bench/results)")
    p.add_argument("--docs", type=Path, help="Markdown report (default docs/benchmarks.md)")
    p.add_argument(
        "--data-dir",
        type=Path,
        help="index folder (default: one per --env set); query-time settings may reuse another",
    )
    args = p.parse_args(argv)
    env = parse_env(args.env, p)
    out_dir = args.out or RESULTS_DIR
    # "third-party-text-300-…" for the text renderings: the rerank fit reads
    # the default index, "third-party-300-" and the digest of no --env.
    text = "" if args.renderings == "as-found" else f"-{args.renderings}"
    return Options(
        queries_path=args.queries,
        pages=args.pages,
        rerank_model="" if args.no_rerank else args.rerank_model,
        env=env,
        out_dir=out_dir,
        docs_path=args.docs
        or (BENCHMARKS_MD if out_dir == RESULTS_DIR else out_dir / "benchmarks.md"),
        data_dir=args.data_dir or index_dir(EVAL_DATA, f"third-party{text}-{args.pages}", env),
        stage_dir=SCRATCH_DIR / f"third-party-pages{text}",
        log_dir=SCRATCH_DIR / "logs" / "third-party",
        renderings=args.renderings,
    )


def load_selection(opts: Options, queries: list[DocQuery]) -> tuple[list[Document], dict[str, Any]]:
    """The judged pages and the distractors, loaded as the folder loader reads them."""
    from services.sources.loaders import LoadError, load_directory

    root = pages_dir(corpus_dir())
    ensure_corpus(corpus_dir())
    candidates = one_rendering(corpus_listing(root))
    judged = sorted({doc for q in queries for doc in q.relevant})
    missing = [doc for doc in judged if doc not in candidates]
    if missing:
        raise SystemExit(f"judged pages not in the staged corpus: {', '.join(missing)}")
    count = max(opts.pages - len(judged), 0)
    others = distractors(root, candidates, set(judged), count, MAX_DISTRACTOR_BYTES)
    chosen = [*judged, *others]
    # --renderings text: each page's text source, loaded as such, keeps the page's id.
    texts = [(p, text_source(root, p)) for p in chosen] if opts.renderings == "text" else []
    source_of = {page: source for page, source in texts if source is not None}
    page_of = {source: page for page, source in source_of.items()}
    staged = [source_of.get(p, p) for p in chosen]
    if opts.renderings.startswith("every"):
        staged += other_renderings(corpus_listing(root), chosen)
    stage = staged_subset(root, staged, opts.stage_dir)
    documents, unreadable, skipped = [], [], []
    every_file = opts.renderings == "every-file"
    for item in load_directory(stage, scope_id=SCOPE, base_url=BASE_URL, all_renderings=every_file):
        if isinstance(item, LoadError) and item.skipped:
            skipped.append(item.source)
        elif isinstance(item, LoadError):
            unreadable.append(f"{item.source}: {item.reason}")
        elif item.doc_id in page_of:
            page = page_of[item.doc_id]
            documents.append(replace(item, doc_id=page, url=BASE_URL + page))
        else:
            documents.append(item)
    selection = {
        "corpus": "scripts/fetch_doc_corpus.py (pages staged outside the clone)",
        "judged_pages": len(judged),
        "text_sources": len(source_of),
        "staged_files": len(staged),
        "skipped_renderings": len(skipped),
        "distractor_pages": len(others),
        "max_distractor_bytes": MAX_DISTRACTOR_BYTES,
        "pages_by_source": _by_source(doc.doc_id for doc in documents),
        "unreadable": unreadable,
    }
    return documents, selection


def _by_source(doc_ids: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for doc_id in doc_ids:
        source = doc_id.split("/", 1)[0]
        counts[source] = counts.get(source, 0) + 1
    return dict(sorted(counts.items()))


def measure(
    opts: Options, documents: list[Document], queries: list[DocQuery]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    reranker, why_not = start_reranker(opts.rerank_model, opts.log_dir)
    not_measured = {RERANKED: why_not} if reranker is None else {}
    serving = reranker.addr if reranker is not None else ""
    stack = Stack.start(opts.data_dir, opts.log_dir, {**opts.env, "RAG_RERANKER_ADDR": serving})
    try:
        ingest = sync_documents(stack.indexer_addr, documents, SCOPE, timeout_s=1800)
        stats = index_stats(stack.indexer_addr)
        wanted = [name for name in CONFIGS if name != RERANKED or reranker is not None]
        configs = {name: run_config(stack.retriever_addr, queries, name) for name in wanted}
    finally:
        stack.stop()
        if reranker is not None:
            reranker.stop()
    index = {
        "documents": int(stats["documents"]),
        "chunks": int(stats["chunks"]),
        "embedding_model": stats["embedding_model"],
        "lexical_backend": stats["lexical_backend"],
        "reused": ingest.reused,
        "seconds": ingest.seconds,
        "rejected": ingest.rejected,
    }
    return index, configs, not_measured


def run_config(addr: str, queries: list[DocQuery], name: str) -> dict[str, Any]:
    """Every query once, one at a time; scored per split and over all."""
    shape = CONFIGS[name]

    def make_request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text,
            top_k=TOP_K,
            max_chunks_per_document=1,
            filter=pb.ScopeFilter(scope_id=SCOPE),
            **shape,
        )

    pairs = [(q.id, q.text) for q in queries]
    run_load(addr, pairs[:1], make_request)  # warm-up
    load = run_load(addr, pairs, make_request, timeout_s=120)
    ranked = {
        a.query_id: distinct_documents([hit.doc_id for hit in a.response.hits])
        for a in load.answers
        if a.response is not None
    }
    degraded = sum(1 for a in load.answers if a.response is not None and a.response.degraded)
    scores = {
        split: evaluate(qrels(q for q in queries if q.split == split), ranked) for split in SPLITS
    }
    return {
        **scores,
        "all": evaluate(qrels(queries), ranked),
        "latency": latency_summary(load.latencies_ms),
        "errors": load.errors,
        "degraded_responses": degraded,
        "rank1": {qid: docs[0] if docs else "" for qid, docs in ranked.items()},
    }


def assess(configs: dict[str, Any]) -> list[dict[str, Any]]:
    """hit@1 on the test split: with reranking when measured, and fusion alone."""
    return [
        THIRD_PARTY_HIT1.assess(configs[name]["test"]["hit@1"], f"{name}, test split")
        if name in configs
        else THIRD_PARTY_HIT1.assess(None, f"{name}: not measured")
        for name in (RERANKED, "hybrid")
    ]


def print_summary(result: dict[str, Any], path: Path) -> None:
    index = result["index"]
    built = "reused" if index["reused"] else f"built in {index['seconds']} s"
    print(f"index: {index['documents']} pages, {index['chunks']} chunks, {built}")
    for name, config in result["configs"].items():
        for split in ("test", "all"):
            figures = ", ".join(f"{k}={v}" for k, v in config[split].items())
            print(f"{name:14} {split:5} {figures}  p50={config['latency']['p50_ms']} ms")
    for name, reason in result["not_measured"].items():
        print(f"{name:14} not measured: {reason}")
    for target in result["targets"]:
        verdict = f"{target['verdict']}; {target['note']}"
        print(f"target: {target['what']}: {target['measured']} ({verdict})")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
