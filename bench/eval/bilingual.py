"""`make eval-bilingual`: identifiers, Chinese and cross-language questions through the RPCs.

SciFact says how well English prose is ranked; it says nothing about the
things a bilingual product manual needs: an exact identifier (`RATE_LIMITED`,
`SKERRY_API_KEY`) coming first, Chinese questions finding Chinese pages, and a
question in one language finding the page that answers it only in the other
(kinds `cross_zh_en` and `cross_en_zh`, each scored and targeted on its own).
This command starts the embedded stack as its own process, syncs the data set
(bench/datasets/bilingual: pages per locale folder, judged queries) into one
scope through the Indexer, and sends every query through `Retrieve` in each
configuration: lexical only, vector only, hybrid (reranking off), and, when a
Reranker serves (`--rerank-model`, default the Reranker's own default model;
`--no-rerank`), hybrid + rerank: what a caller gets from the defaults. Top 10,
the server's defaults otherwise, `debug` on to see what the lexical channel
returned. The targets are assessed on hybrid.

Settings under test go to the stack with `--env KEY=VALUE`; each set of them
gets its own index (.data/eval/<dataset>-<hash of the settings>) and is
recorded, under `--variant NAME`, in bench/results/bilingual.json, which keeps
one entry per variant. docs/benchmarks.md is regenerated after each run.

    python -m bench.eval.bilingual                                     # the default variant
    python -m bench.eval.bilingual --env RAG_LEXICAL_CJK=bigram --variant cjk-bigram
    python -m bench.eval.bilingual --smoke --out /tmp/x                # two queries per kind
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.indexing import IngestReport, index_stats, sync_documents
from bench.common.paths import (
    BENCHMARKS_MD,
    DATASETS_DIR,
    EVAL_DATA,
    RESULTS_DIR,
    ROOT,
    SCRATCH_DIR,
)
from bench.common.processes import Stack, start_reranker
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import run_load
from bench.eval.bilingual_data import (
    SPLITS,
    BilingualDataset,
    Query,
    cjk_characters,
    query_counts,
    smoke_queries,
    unknown_judgments,
)
from bench.eval.bilingual_scoring import (
    IDENTIFIER_GROUP,
    TOP_K,
    Outcome,
    failures,
    group_metrics,
    outcome,
    per_query,
)
from bench.reports.bilingual import DEFAULT_VARIANT, RESULTS_FILE
from bench.reports.page import write_report
from bench.reports.targets import (
    CROSS_EN_ZH_TOP3,
    CROSS_ZH_EN_TOP3,
    IDENTIFIER_EXACT,
    ZH_LEXICAL,
    ZH_TOP3,
    Target,
)
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.models import Document
from services.reranker.settings import DEFAULT_MODEL as DEFAULT_RERANK_MODEL
from services.storage.factory import MANIFEST_FILE

SCOPE = "bilingual"
TARGET_SPLIT = "test"
# Request shape per configuration. The vector-only one names the query's
# language as English: the service may skip the vector channel for a query it
# detects as Chinese, which would leave this configuration with nothing to score.
# Reranking is off except in "hybrid+rerank", the server's defaults as a caller
# gets them (measured when a Reranker serves).
RERANKED = "hybrid+rerank"
CONFIGS: dict[str, dict[str, Any]] = {
    "lexical": {"channels": [pb.CHANNEL_LEXICAL]},
    "vector": {"channels": [pb.CHANNEL_VECTOR], "query_language": "en"},
    "hybrid": {},
    RERANKED: {"disable_rerank": False},
}
_ENV_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True)
class Options:
    dataset: BilingualDataset
    out_dir: Path
    docs_path: Path
    data_dir: Path
    env: dict[str, str]
    variant: str
    smoke: bool
    rebuild: bool
    log_dir: Path
    rerank_model: str  # "" when --no-rerank


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv)
    record = run_record(["-m", "bench.eval.bilingual", *argv])
    documents, unreadable = opts.dataset.documents(SCOPE)
    queries = opts.dataset.queries()
    if opts.smoke:
        queries = smoke_queries(queries)
    if opts.rebuild:
        remove_index(opts.data_dir)
    index, outcomes, not_measured = measure(opts, documents, queries)
    index["documents_by_locale"] = dict(Counter(doc.locale for doc in documents))
    index["unreadable"] = unreadable
    index["unknown_judgments"] = unknown_judgments(queries, documents)
    result = {
        "variant": opts.variant,
        "dataset": opts.dataset.name,
        "dataset_path": _shown(opts.dataset.root),
        **record,
        "smoke": opts.smoke,
        "env": opts.env,
        # RAG_* variables of the calling shell reach the stack too: recorded, not hidden.
        "inherited_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("RAG_")},
        "index": index,
        "request": request_section(),
        "queries": query_counts(queries),
        "configs": {name: config_section(found) for name, found in outcomes.items()},
        "not_measured": not_measured,
        # The figures of record are the test split's (nothing was fitted on it);
        # all queries (train included) are kept for continuity, labelled.
        "targets_split": TARGET_SPLIT,
        "targets": assess(split_outcomes(outcomes, TARGET_SPLIT), corpus_characters(documents)),
        "targets_all_queries": assess(outcomes, corpus_characters(documents)),
    }
    path = record_variant(opts.out_dir / RESULTS_FILE, result)
    write_report(opts.out_dir, opts.docs_path)
    print_summary(result, path)
    return 0


def parse_args(argv: list[str]) -> Options:
    p = argparse.ArgumentParser(
        prog="python -m bench.eval.bilingual",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dataset", type=Path, default=DATASETS_DIR / "bilingual")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for the stack process (repeatable); recorded with the result",
    )
    p.add_argument("--variant", help="the result's name (default: 'default', or the --env list)")
    p.add_argument("--smoke", action="store_true", help="two queries per kind")
    p.add_argument("--out", type=Path, help="results folder (default bench/results)")
    p.add_argument("--docs", type=Path, help="Markdown report (default docs/benchmarks.md)")
    p.add_argument("--data-dir", type=Path, help="index folder (default: one per --env set)")
    p.add_argument("--rebuild", action="store_true", help="start from an empty index")
    p.add_argument("--rerank-model", default=DEFAULT_RERANK_MODEL)
    p.add_argument("--no-rerank", action="store_true", help=f"no Reranker: no {RERANKED}")
    args = p.parse_args(argv)
    dataset = BilingualDataset(args.dataset.resolve())
    dataset.check()
    env = parse_env(args.env, p)
    out_dir = args.out or (SCRATCH_DIR / "smoke" if args.smoke else RESULTS_DIR)
    default_data = out_dir / "data" if args.smoke else EVAL_DATA
    return Options(
        dataset=dataset,
        out_dir=out_dir,
        # The page is rendered from out_dir's results: only bench/results makes the real one.
        docs_path=args.docs
        or (BENCHMARKS_MD if out_dir == RESULTS_DIR else out_dir / "benchmarks.md"),
        data_dir=args.data_dir or index_dir(default_data, dataset.name, env),
        env=env,
        variant=args.variant or _variant_name(env),
        smoke=args.smoke,
        rebuild=args.rebuild,
        log_dir=(out_dir if args.smoke else SCRATCH_DIR) / "logs" / "bilingual",
        rerank_model="" if args.no_rerank else args.rerank_model,
    )


def parse_env(pairs: list[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not _ENV_KEY.match(key):
            parser.error(f"--env {pair!r}: expected KEY=VALUE with an upper-case KEY")
        env[key] = value
    return dict(sorted(env.items()))


def _variant_name(env: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in env.items()) or DEFAULT_VARIANT


def index_dir(parent: Path, dataset_name: str, env: dict[str, str]) -> Path:
    """One index per set of settings: any of them may change what is indexed
    (tokenisation, Markdown cleaning), and the Indexer never re-indexes a page
    whose text is unchanged, so sharing an index would measure the old one."""
    digest = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:10]
    return parent / f"{dataset_name}-{digest}"


def remove_index(data_dir: Path) -> None:
    """Delete an index folder, but only one that looks like an index."""
    if not data_dir.exists():
        return
    if any(data_dir.iterdir()) and not (data_dir / MANIFEST_FILE).is_file():
        raise SystemExit(f"--rebuild: {data_dir} has no {MANIFEST_FILE}; not an index, kept")
    shutil.rmtree(data_dir)


def measure(
    opts: Options, documents: list[Document], queries: list[Query]
) -> tuple[dict[str, Any], dict[str, list[Outcome]], dict[str, str]]:
    """Index, then every configuration's outcomes; `hybrid+rerank` only when a
    Reranker serves (the third value says why it was not measured)."""
    reranker, why_not = start_reranker(opts.rerank_model, opts.log_dir)
    serving = reranker.addr if reranker is not None else ""
    stack = Stack.start(opts.data_dir, opts.log_dir, {**opts.env, "RAG_RERANKER_ADDR": serving})
    try:
        ingest = sync_documents(stack.indexer_addr, documents, SCOPE)
        stats = index_stats(stack.indexer_addr)
        wanted = [name for name in CONFIGS if name != RERANKED or reranker is not None]
        outcomes = {name: run_config(stack.retriever_addr, queries, name) for name in wanted}
    finally:
        stack.stop()
        if reranker is not None:
            reranker.stop()
    return index_section(opts, ingest, stats), outcomes, {RERANKED: why_not} if why_not else {}


def run_config(addr: str, queries: list[Query], name: str) -> list[Outcome]:
    """Every query once, one at a time, in one request configuration."""
    shape = CONFIGS[name]
    lexical = not shape.get("channels") or pb.CHANNEL_LEXICAL in shape["channels"]

    def make_request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text,
            top_k=TOP_K,
            filter=pb.ScopeFilter(scope_id=SCOPE),
            debug=True,
            **{"disable_rerank": True, **shape},
        )

    by_id = {q.id: q for q in queries}
    run_load(addr, [(q.id, q.text) for q in queries[:1]], make_request)  # warm-up
    load = run_load(addr, [(q.id, q.text) for q in queries], make_request)
    latency = latency_summary(load.latencies_ms)
    print(f"{name}: {len(load.answers)} queries, p50 {latency['p50_ms']} ms")
    return [outcome(by_id[a.query_id], a.response, lexical, a.error) for a in load.answers]


def split_outcomes(outcomes: dict[str, list[Outcome]], split: str) -> dict[str, list[Outcome]]:
    """Each configuration's outcomes for the queries of one split."""
    return {name: [o for o in found if o.query.split == split] for name, found in outcomes.items()}


def config_section(outcomes: list[Outcome]) -> dict[str, Any]:
    """`groups`: all queries (train and test); `split_groups`: per split."""
    splits = {split: [o for o in outcomes if o.query.split == split] for split in SPLITS}
    return {
        "groups": group_metrics(outcomes),
        "split_groups": {split: group_metrics(found) for split, found in splits.items() if found},
        "errors": sorted({o.error for o in outcomes if o.error}),
        "failures": failures(outcomes),
        "per_query": per_query(outcomes),
    }


def index_section(opts: Options, ingest: IngestReport, stats: dict[str, Any]) -> dict[str, Any]:
    return {
        "data_dir": _shown(opts.data_dir),
        "documents": int(stats["documents"]),
        "chunks": int(stats["chunks"]),
        "chunks_by_locale": {k: int(v) for k, v in stats.get("chunks_by_locale", {}).items()},
        "embedding_model": stats["embedding_model"],
        "lexical_backend": stats["lexical_backend"],
        "reused": ingest.reused,
        "seconds": ingest.seconds,
        "counts": ingest.counts,
        "rejected": ingest.rejected,
    }


def _shown(path: Path) -> str:
    """A path relative to the repository when inside it: results name no home folder."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def request_section() -> dict[str, Any]:
    return {
        "top_k": TOP_K,
        "disable_rerank": f"true, except {RERANKED}",
        "debug": True,
        "candidates_per_channel": "server default",
        "max_chunks_per_document": "server default",
        "scope_id": SCOPE,
        "configs": {
            "lexical": "channels=[CHANNEL_LEXICAL]",
            "vector": "channels=[CHANNEL_VECTOR], query_language=en",
            "hybrid": "both channels, query language detected by the service",
            RERANKED: "hybrid, reranked by the Reranker's default model under the server's "
            "rerank settings (candidates, budget, languages, blend)",
        },
    }


def corpus_characters(documents: list[Document]) -> set[str]:
    return set().union(*(cjk_characters(doc.text) for doc in documents))


# Kinds whose hybrid top3 has a target of its own, in report order.
TOP3_TARGETS: tuple[tuple[str, Target], ...] = (
    ("zh_question", ZH_TOP3),
    ("cross_zh_en", CROSS_ZH_EN_TOP3),
    ("cross_en_zh", CROSS_EN_ZH_TOP3),
)


def assess(outcomes: dict[str, list[Outcome]], corpus_chars: set[str]) -> list[dict[str, Any]]:
    """The targets: identifiers exact at rank 1; a relevant chunk in the top 3
    for Chinese questions and for each cross-language direction; the lexical
    channel answering Chinese queries. A Chinese query counts for the lexical
    one when every Chinese character it contains occurs somewhere in the
    pages: a query about something the corpus never mentions may rightly find
    nothing. A kind with no queries in the run is "not measured"."""
    hybrid = group_metrics(outcomes["hybrid"])
    chinese = [o for o in outcomes["lexical"] if cjk_characters(o.query.text)]
    covered = [o for o in chinese if cjk_characters(o.query.text) <= corpus_chars]
    found = [o for o in covered if o.lexical_nonempty]
    left_out = [o.query.id for o in chinese if o not in covered]
    identifiers = hybrid.get(IDENTIFIER_GROUP, {})
    return [
        IDENTIFIER_EXACT.assess(
            identifiers.get("exact@1"), f"{identifiers.get('exact_queries', 0)} queries"
        ),
        *(
            target.assess(hybrid.get(kind, {}).get("top3"), _queries_note(hybrid.get(kind, {})))
            for kind, target in TOP3_TARGETS
        ),
        ZH_LEXICAL.assess(
            round(len(found) / len(covered), 4) if covered else None,
            f"{len(found)} of {len(covered)}; {len(chinese)} Chinese queries in all"
            + (f", not counted: {', '.join(left_out)}" if left_out else ""),
        ),
    ]


def _queries_note(figures: dict[str, Any]) -> str:
    return f"{figures.get('queries', 0)} queries"


def record_variant(path: Path, result: dict[str, Any]) -> Path:
    """Write this run under its variant, keeping every other variant's result."""
    record: dict[str, Any] = {"variants": {}}
    if path.is_file():
        record = json.loads(path.read_text())
    record["variants"][result["variant"]] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return path


def print_summary(result: dict[str, Any], path: Path) -> None:
    index = result["index"]
    print(f"index: {'reused' if index['reused'] else 'built'} in {index['seconds']} s")
    for name, config in result["configs"].items():
        for split, groups in [("all", config["groups"]), *config["split_groups"].items()]:
            for group, m in groups.items():
                figures = ", ".join(f"{k}={v}" for k, v in m.items() if v is not None)
                print(f"{name:8} {split:5} {group:20} {figures}")
    for target in result["targets"]:
        print(f"target: {target['what']}: {target['measured']} ({target['verdict']})")
    for warning in index["unknown_judgments"] + index["unreadable"] + index["rejected"]:
        print(f"warning: {warning}")
    print(f"wrote {path} (variant {result['variant']!r})")


if __name__ == "__main__":
    sys.exit(main())
