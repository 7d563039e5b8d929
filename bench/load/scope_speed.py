"""Retrieve against the model on three index shapes, two revisions
interleaved: does a Retrieve cost the query embedding and little more, on an
index of one locale and on a multi-scope index with a bilingual tenant?

Shapes (each Retrieve scoped, no reranking, query cache off):

- `scifact`: SciFact documents alone, SciFact questions;
- `english-scope`: the same SciFact scope inside an index that also holds a
  bilingual (en / zh-CN) scope, SciFact questions scoped to SciFact;
- `bilingual-scope`: that index, the bilingual set's questions scoped to the
  bilingual pages (bench/datasets/bilingual).

Per round, on each shape: the query embedding alone in this process (one
query at a time: p50 and the embedding-bound throughput), then each
revision's stack at c=1 (p50) and c=16 (requests/s), the two revisions in
alternating order. Ratios are taken within a round (the machine is shared,
so only same-round ratios are meaningful) and their median over rounds is
reported. `--base-rev` and `--rev` run from temporary detached worktrees;
the indexes are built once with this tree's code and copied, so both
revisions read the same data.

    python -m bench.load.scope_speed --base-rev a877b41 --rev HEAD
    python -m bench.load.scope_speed --smoke --out /tmp/scope.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from services.runtime.cpu import prefer_passive_waits

prefer_passive_waits()  # as the services, before anything imports torch

from bench.common.checkout import Checkout  # noqa: E402
from bench.common.indexing import index_stats, ingest_beir, sync_documents  # noqa: E402
from bench.common.paths import (  # noqa: E402
    DATASETS_DIR,
    RESULTS_DIR,
    SCRATCH_DIR,
    SHARED_DATASETS,
)
from bench.common.processes import Stack  # noqa: E402
from bench.common.record import latency_summary, run_record  # noqa: E402
from bench.common.retrieve_loop import run_load  # noqa: E402
from bench.eval.bilingual_data import BilingualDataset  # noqa: E402
from bench.eval.dataset import BeirDataset, write_subset  # noqa: E402
from bench.load.model_bound import load_embedder, query_embedding  # noqa: E402
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb  # noqa: E402
from services.runtime.parts import ONNX_CACHE_SUBDIR  # noqa: E402
from services.storage.settings import StoreSettings  # noqa: E402

SCIFACT_SCOPE, BILINGUAL_SCOPE = "scifact", "bilingual"
LOGS = SCRATCH_DIR / "scope-speed"
# No metrics listener: its fixed port may be taken by another stack on the
# machine. The model's ONNX export shared with the load client's embedder,
# not rebuilt in every fresh index folder (minutes on a loaded machine).
ENV = {
    "RAG_QUERY_CACHE_SIZE": "0",
    "RAG_METRICS_ENABLED": "false",
    "RAG_EMBEDDING_CACHE_DIR": str(StoreSettings().data_dir / ONNX_CACHE_SUBDIR),
}
Queries = list[tuple[str, str]]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--base-rev", default="a877b41", help="the revision before (worktree)")
    p.add_argument("--rev", default="HEAD", help="the revision measured (worktree)")
    p.add_argument("--scifact", type=Path, default=SHARED_DATASETS / "scifact")
    p.add_argument("--docs", type=int, default=2000, help="SciFact documents indexed")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--c1-requests", type=int, default=150, help="per revision, shape and round")
    p.add_argument("--c16-requests", type=int, default=320, help="per revision, shape and round")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "scope_speed.json")
    p.add_argument("--smoke", action="store_true", help="tiny index, few requests")
    args = p.parse_args(argv)
    if args.smoke:
        args.docs, args.rounds, args.c1_requests, args.c16_requests = 40, 1, 10, 32
    return args


def main(argv: list[str] | None = None) -> int:
    # A TERM (a timeout) unwinds like an exception: stacks stopped, worktrees removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args(sys.argv[1:] if argv is None else argv)
    record = run_record(["-m", "bench.load.scope_speed", *(argv or sys.argv[1:])])
    scifact = BeirDataset(args.scifact)
    scifact_queries = list(scifact.queries().items())
    bilingual = BilingualDataset(DATASETS_DIR / "bilingual")
    bilingual_queries = [(q.id, q.text) for q in bilingual.queries()]
    embedder = load_embedder()
    with tempfile.TemporaryDirectory(prefix="scope-speed-") as tmp, ExitStack() as cleanup:
        scratch = Path(tmp)
        index = build_indexes(args, scifact, bilingual, scratch)
        base = cleanup.enter_context(_checkout(args.base_rev))
        this = cleanup.enter_context(_checkout(args.rev))
        trees = {"base": base.path, "this": this.path}
        shapes = [
            ("scifact", "single", SCIFACT_SCOPE, scifact_queries),
            ("english-scope", "multi", SCIFACT_SCOPE, scifact_queries),
            ("bilingual-scope", "multi", BILINGUAL_SCOPE, bilingual_queries),
        ]
        rows: list[dict[str, Any]] = []
        for name in ("single", "multi"):
            stacks = start_stacks(trees, index[name], scratch / name)
            try:
                for shape, _, scope, queries in (s for s in shapes if s[1] == name):
                    rows += measure_shape(args, embedder, stacks, shape, scope, queries)
            finally:
                for stack in stacks.values():
                    stack.stop()
        result = {
            **record,
            "base": base.describe(),
            "this": this.describe(),
            "index": index["stats"],
            "rounds": rows,
            "summary": summarise(rows),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {args.out}")
    return 0


@contextmanager
def _checkout(revision: str) -> Iterator[Checkout]:
    checkout = Checkout(revision).open()
    if checkout.path is None:
        raise SystemExit(checkout.reason)
    try:
        yield checkout
    finally:
        checkout.close()


def build_indexes(
    args: argparse.Namespace, scifact: BeirDataset, bilingual: BilingualDataset, scratch: Path
) -> dict[str, Any]:
    """The SciFact index, and a copy of it with the bilingual pages added in
    a scope of their own (built with this tree's code)."""
    sample = write_subset(scifact, scratch / "sample", queries=0, filler_docs=args.docs)
    single, multi = scratch / "index-single", scratch / "index-multi"
    stack = Stack.start(single, LOGS, ENV, log_name="build-single.log")
    try:
        ingest_beir(
            stack.indexer_addr, sample / "corpus.jsonl", SCIFACT_SCOPE, title_as_heading=True
        )
        single_stats = index_stats(stack.indexer_addr)
    finally:
        stack.stop()
    shutil.copytree(single, multi)
    stack = Stack.start(multi, LOGS, ENV, log_name="build-multi.log")
    try:
        pages, unreadable = bilingual.documents(BILINGUAL_SCOPE)
        assert not unreadable, unreadable
        sync_documents(stack.indexer_addr, pages, BILINGUAL_SCOPE)
        multi_stats = index_stats(stack.indexer_addr)
    finally:
        stack.stop()
    counts = {
        "single": {k: single_stats[k] for k in ("documents", "chunks")},
        "multi": {k: multi_stats[k] for k in ("documents", "chunks")},
        "bilingual_pages": len(pages),
        "scifact_docs_requested": args.docs,
    }
    return {"single": single, "multi": multi, "stats": counts}


def start_stacks(trees: dict[str, Path | None], index: Path, scratch: Path) -> dict[str, Stack]:
    """One stack per revision, each on its own copy of `index`."""
    stacks: dict[str, Stack] = {}
    try:
        for name, tree in trees.items():
            assert tree is not None
            copy = scratch / f"data-{name}"
            shutil.copytree(index, copy)
            stacks[name] = Stack.start(copy, LOGS, ENV, cwd=tree, log_name=f"{name}.log")
    except BaseException:
        for stack in stacks.values():
            stack.stop()
        raise
    return stacks


def request_factory(scope: str) -> Callable[[str], pb.RetrieveRequest]:
    def make(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text, filter=pb.ScopeFilter(scope_id=scope), disable_rerank=True
        )

    return make


def measure_shape(
    args: argparse.Namespace,
    embedder: Any,
    stacks: dict[str, Stack],
    shape: str,
    scope: str,
    queries: Queries,
) -> list[dict[str, Any]]:
    make, rows = request_factory(scope), []
    c1, c16 = _cycle(queries, args.c1_requests), _cycle(queries, args.c16_requests)
    for stack in stacks.values():  # warm-up: first calls per input length are slow
        run_load(stack.retriever_addr, c16[:32], make, concurrency=16)
    for round_no in range(args.rounds):
        model = query_embedding(embedder, [text for _, text in c1])
        order = list(stacks) if round_no % 2 == 0 else list(reversed(stacks))
        for revision in order:
            addr = stacks[revision].retriever_addr
            one = run_load(addr, c1, make, concurrency=1, keep_responses=False)
            many = run_load(addr, c16, make, concurrency=16, keep_responses=False)
            row = {
                "shape": shape,
                "revision": revision,
                "round": round_no,
                "embedding_p50_ms": model["query_ms"]["p50_ms"],
                "bound_qps": model["bound_qps"],
                "c1": latency_summary(one.latencies_ms),
                "c16_rps": many.throughput_rps,
                "errors": {**one.errors, **many.errors},
            }
            row["c1_p50_ratio"] = round(row["c1"]["p50_ms"] / row["embedding_p50_ms"], 3)
            row["c16_share"] = round(row["c16_rps"] / row["bound_qps"], 3)
            print(json.dumps(row))
            rows.append(row)
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape and revision: the median over rounds of each same-round ratio."""
    keys = sorted({(r["shape"], r["revision"]) for r in rows}, key=lambda k: (k[0], k[1]))
    summary = []
    for shape, revision in keys:
        mine = [r for r in rows if (r["shape"], r["revision"]) == (shape, revision)]
        summary.append(
            {
                "shape": shape,
                "revision": revision,
                "c1_p50_ms": statistics.median(r["c1"]["p50_ms"] for r in mine),
                "embedding_p50_ms": statistics.median(r["embedding_p50_ms"] for r in mine),
                "c1_p50_ratio": statistics.median(r["c1_p50_ratio"] for r in mine),
                "c16_rps": statistics.median(r["c16_rps"] for r in mine),
                "bound_qps": statistics.median(r["bound_qps"] for r in mine),
                "c16_share": statistics.median(r["c16_share"] for r in mine),
                "rounds": len(mine),
            }
        )
    return summary


def _cycle(queries: Queries, count: int) -> Queries:
    return [queries[i % len(queries)] for i in range(count)]


if __name__ == "__main__":
    sys.exit(main())
