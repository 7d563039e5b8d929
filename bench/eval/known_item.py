"""Known-item queries over the third-party documentation index: the veto set
for channel weights.

The question sets (SciFact, the bilingual set, the third-party questions) are
made of whole questions, where the vector channel is the stronger one. A user
also types a few words they remember from a page, or pastes a line of it; a
weight fitted on questions must not lose those. The queries are generated
from the indexed pages themselves (deterministic, no judgement written by
hand), in two kinds:

- `words-N`: one word found on at most RARE_DF pages plus N-1 other content
  words of the same page (each on at most a few percent of the pages),
  without function words, as someone types what they remember;
- `line`: LINE_WORDS consecutive words of one of the page's sentences,
  function words included, as someone pastes a line.

A query's relevant pages are every indexed page holding all of its words
(for `line`, its exact text), so a hit on another page that holds them is no
miss. Every query runs through `Retrieve` (hybrid, reranking off, one chunk
per page) once per vector weight given, as a request's `weights`, against
the index `python -m bench.eval.third_party` builds (reused; built when
missing). Scored per kind: hit@1, top 3, MRR@10.

    python -m bench.eval.known_item                       # weights 1 and 3
    python -m bench.eval.known_item --vector-weights 1,2,3 --pages-sampled 120
    python -m bench.eval.known_item --default-only        # the server's own weights
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.indexing import sync_documents
from bench.common.paths import BENCHMARKS_MD, RESULTS_DIR
from bench.common.processes import Stack
from bench.common.record import latency_summary, run_record
from bench.common.retrieve_loop import run_load
from bench.eval.metrics import distinct_documents, evaluate
from bench.eval.third_party import SCOPE, TOP_K, load_selection, parse_args
from bench.eval.third_party_data import read_queries
from bench.reports.page import write_report
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.analysis.stopwords import is_stopword
from services.core.models import Document
from services.indexer.body import normalize_body

RESULTS_FILE = "known-item.json"
WORD = re.compile(r"[a-z][a-z]{3,}")  # content words: letters only, 4 or more
SENTENCE = re.compile(r"[^.!?\n]{40,}[.!?]")
RARE_DF = 2  # the remembered word is on at most this many pages
COMMON_SHARE = 0.05  # the other words are on at most this share of the pages
SIZES = (1, 2, 3, 4, 6)
LINE_WORDS = 8
DEFAULT_ONLY = "server default"
LEXICAL_ONLY = -1.0  # a point of the run: the lexical channel alone


@dataclass(frozen=True)
class KnownItem:
    id: str
    kind: str
    text: str
    relevant: tuple[str, ...]


def make_queries(
    documents: Sequence[Document], pages: int, seed: str = "known-item"
) -> list[KnownItem]:
    """Per sampled page: one `words-N` query per size and one `line`."""
    # The text a reader sees (HTML and Markdown markup removed), as indexed.
    bodies = {doc.doc_id: normalize_body(doc) for doc in documents}
    flat = {doc_id: " ".join(body.split()) for doc_id, body in bodies.items()}
    words = {doc_id: _content_words(body) for doc_id, body in bodies.items()}
    df = Counter(word for page in words.values() for word in set(page))
    common_cap = max(RARE_DF + 1, int(COMMON_SHARE * len(documents)))
    sampled = sorted(documents, key=lambda d: hashlib.sha1((seed + d.doc_id).encode()).hexdigest())
    queries: list[KnownItem] = []
    for doc in sampled[:pages]:
        rng = random.Random(seed + doc.doc_id)
        rare = [w for w in words[doc.doc_id] if df[w] <= RARE_DF]
        other = [w for w in words[doc.doc_id] if RARE_DF < df[w] <= common_cap]
        if not rare:
            continue
        for size in SIZES:
            if len(other) < size - 1:
                break
            chosen = [rng.choice(rare), *rng.sample(other, size - 1)]
            held = [d for d, page in words.items() if set(chosen) <= set(page)]
            queries.append(
                KnownItem(f"{doc.doc_id}#w{size}", f"words-{size}", " ".join(chosen), tuple(held))
            )
        line = _line(bodies[doc.doc_id], rng)
        if line:
            held = [doc_id for doc_id, text in flat.items() if line in text]
            queries.append(KnownItem(f"{doc.doc_id}#line", "line", line, tuple(held)))
    return queries


def _content_words(body: str) -> list[str]:
    """The page's content words, each once, in order of first appearance."""
    return list(dict.fromkeys(w for w in WORD.findall(body.lower()) if not is_stopword(w)))


def _line(body: str, rng: random.Random) -> str:
    """LINE_WORDS consecutive words of one prose sentence of the page."""
    sentences = [
        " ".join(s.split())
        for s in SENTENCE.findall(body)
        if re.fullmatch(r"[\w\s,'()-]+[.!?]", s.strip())
    ]
    long_enough = [s for s in sentences if len(s.split()) >= LINE_WORDS]
    if not long_enough:
        return ""
    words = rng.choice(long_enough).split()
    start = rng.randrange(len(words) - LINE_WORDS + 1)
    return " ".join(words[start : start + LINE_WORDS])


def run_weight(addr: str, queries: list[KnownItem], vector_weight: float | None) -> dict[str, Any]:
    """Every query once at one vector weight (None: the server's default
    weights; LEXICAL_ONLY: the lexical channel alone, for scale)."""
    channels = [pb.CHANNEL_LEXICAL] if vector_weight == LEXICAL_ONLY else []
    vector_weight = None if vector_weight == LEXICAL_ONLY else vector_weight
    weights = None if vector_weight is None else pb.ChannelWeights(vector=vector_weight, lexical=1)

    def make_request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text,
            top_k=TOP_K,
            max_chunks_per_document=1,
            disable_rerank=True,
            filter=pb.ScopeFilter(scope_id=SCOPE),
            weights=weights,
            channels=channels,
        )

    load = run_load(addr, [(q.id, q.text) for q in queries], make_request, timeout_s=120)
    ranked = {
        a.query_id: distinct_documents([hit.doc_id for hit in a.response.hits])
        for a in load.answers
        if a.response is not None
    }
    return {
        "kinds": {
            kind: evaluate(_qrels(q for q in queries if q.kind == kind), ranked)
            for kind in _kinds(queries)
        },
        "all": evaluate(_qrels(queries), ranked),
        "latency": latency_summary(load.latencies_ms),
        "errors": load.errors,
    }


def _qrels(queries: Iterable[KnownItem]) -> dict[str, dict[str, int]]:
    return {q.id: {doc: 1 for doc in q.relevant} for q in queries}


def _kinds(queries: Sequence[KnownItem]) -> list[str]:
    return list(dict.fromkeys(q.kind for q in queries))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(
        prog="python -m bench.eval.known_item",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--vector-weights", default="1,3", help="comma-separated, lexical weight 1")
    p.add_argument("--default-only", action="store_true", help="only the server's own weights")
    p.add_argument("--pages-sampled", type=int, default=100)
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = p.parse_args(argv)
    opts = parse_args(["--no-rerank", *(f"--env={e}" for e in args.env)])
    record = run_record(["-m", "bench.eval.known_item", *argv])
    # The third-party set's own page selection (its judged pages and the same
    # distractors), so both harnesses keep one index without re-syncing it.
    documents, _ = load_selection(opts, read_queries(opts.queries_path))
    queries = make_queries(documents, args.pages_sampled)
    points: list[float | None] = (
        [None]
        if args.default_only
        else [None, LEXICAL_ONLY, *map(float, args.vector_weights.split(","))]
    )
    stack = Stack.start(opts.data_dir, opts.log_dir, opts.env)
    try:
        sync_documents(stack.indexer_addr, documents, SCOPE, timeout_s=1800)
        run_load(
            stack.retriever_addr,
            [(queries[0].id, queries[0].text)],
            lambda t: pb.RetrieveRequest(query=t, filter=pb.ScopeFilter(scope_id=SCOPE)),
        )
        figures = {_label(w): run_weight(stack.retriever_addr, queries, w) for w in points}
    finally:
        stack.stop()
    result = {
        **record,
        "env": opts.env,
        "index": str(opts.data_dir),
        "pages": len(documents),
        "queries": dict(Counter(q.kind for q in queries)),
        "examples": {
            kind: next(q.text for q in queries if q.kind == kind) for kind in _kinds(queries)
        },
        "figures": figures,
    }
    args.out.mkdir(parents=True, exist_ok=True)  # a scratch --out may not exist yet
    path = args.out / RESULTS_FILE
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    write_report(args.out, BENCHMARKS_MD if args.out == RESULTS_DIR else args.out / "benchmarks.md")
    for label, fig in figures.items():
        row = ", ".join(f"{k} {v['hit@1']:.3f}/{v['mrr@10']:.3f}" for k, v in fig["kinds"].items())
        print(f"{label:16} hit@1/MRR@10: {row}")
    print(f"wrote {path}")
    return 0


def _label(weight: float | None) -> str:
    if weight == LEXICAL_ONLY:
        return "lexical only"
    return DEFAULT_ONLY if weight is None else f"vector weight {weight:g}"


if __name__ == "__main__":
    raise SystemExit(main())
