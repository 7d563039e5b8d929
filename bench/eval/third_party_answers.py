"""Collect the third-party set's answers for offline replays of the locale
rules (bench/eval/locale_turns_fit.py), as bench.eval.locale_order_fit
collects the bilingual set's.

Starts the embedded stack on the third-party index (the pages staged and
synced as `python -m bench.eval.third_party` does; an existing index is
reused), and sends every question once through `Retrieve`: hybrid, reranking
off, the question-first order (RAG_LOCALE_ORDER=question_first), top 30, one
chunk per document (the set is scored per document), debug on so each hit
carries its locale, its cosine and whether the lexical channel found it.
Taking turns keeps each locale's list in its own order, and the
per-document cap keeps a document's first chunk whatever the turns, so the
answer splits back into the locale lists a replay re-orders.

    python -m bench.eval.third_party_answers --data-dir .data/eval/third-party-300-44136fa355
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from bench.common.indexing import sync_documents
from bench.common.paths import DATASETS_DIR, EVAL_DATA, SCRATCH_DIR
from bench.common.processes import Stack
from bench.common.retrieve_loop import run_load
from bench.eval.bilingual import index_dir
from bench.eval.locale_order_fit import Seen, seen
from bench.eval.third_party import SCOPE, Options, load_selection
from bench.eval.third_party_data import DocQuery, read_queries
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

ANSWERS = SCRATCH_DIR / "third-party-answers.json"  # git-ignored
QUERIES = DATASETS_DIR / "third_party" / "queries.jsonl"
DEPTH = 30
PAGES = 300
ENV = {"RAG_LOCALE_ORDER": "question_first", "RAG_METRICS_ENABLED": "false"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.eval.third_party_answers")
    p.add_argument("--data-dir", type=Path, help="the third-party index folder")
    p.add_argument("--out", type=Path, default=ANSWERS)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    queries = read_queries(QUERIES)
    data_dir = args.data_dir or index_dir(EVAL_DATA, f"third-party-{PAGES}", {})
    answers = collect(queries, data_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({q: [asdict(h) for h in hits] for q, hits in answers.items()}))
    print(f"{len(answers)} answers of {len(queries)} questions; wrote {args.out}")
    return 0


def collect(queries: list[DocQuery], data_dir: Path) -> dict[str, list[Seen]]:
    opts = Options(
        queries_path=QUERIES,
        pages=PAGES,
        rerank_model="",
        env=ENV,
        out_dir=SCRATCH_DIR,
        docs_path=SCRATCH_DIR / "unused.md",
        data_dir=data_dir,
        stage_dir=SCRATCH_DIR / "third-party-pages",
        log_dir=SCRATCH_DIR / "logs" / "third-party-answers",
    )
    documents, _ = load_selection(opts, queries)
    stack = Stack.start(opts.data_dir, opts.log_dir, ENV)
    try:
        sync_documents(stack.indexer_addr, documents, SCOPE, timeout_s=1800)

        def make_request(text: str) -> pb.RetrieveRequest:
            return pb.RetrieveRequest(
                query=text,
                top_k=DEPTH,
                max_chunks_per_document=1,
                filter=pb.ScopeFilter(scope_id=SCOPE),
                disable_rerank=True,
                debug=True,
            )

        pairs = [(q.id, q.text) for q in queries]
        load = run_load(stack.retriever_addr, pairs, make_request, timeout_s=120)
    finally:
        stack.stop()
    return {a.query_id: [seen(hit) for hit in a.response.hits] for a in load.answers if a.response}


if __name__ == "__main__":
    sys.exit(main())
