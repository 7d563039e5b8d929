"""Choose the gap at which a locale's turns wait (services.retriever.locale_order,
`wait_gap`, RAG_LOCALE_WAIT_GAP), on the train splits of both documentation
sets, by replaying their answers.

Each set's answers are collected once through `Retrieve` with waiting off
(gap 2): the defaults otherwise, hybrid, reranking off, top 30, debug, one
chunk per document on the third-party set (it is scored per document). The
debug notes carry each locale's best cosine in the cross-lingual channel and
which locale led. For a gap g, the replay moves the hits of every locale
whose best cosine is more than g below the leader's after all the others'
hits, in their order; a first hit holding one of the question's exact
identifiers stays first, as the service's precedence, applied after the
turns, keeps it.

The chosen gap: among those that leave every bilingual kind's and the
third-party set's train hit@1, top 3 and MRR@10 at or above waiting off, the
best summed train top 3 gain (waiting moves hits after rank 1, never rank 1
itself), then the largest gap: the fewest lists made to wait, since hiding
an answer that exists only in another language costs a reader more than an
unrelated page at rank 2 does. Test figures are printed beside it, never
used to choose. The
indexes are those the evaluations build (`python -m bench.eval.bilingual`,
`python -m bench.eval.third_party`).

    python -m bench.eval.locale_wait_fit   # writes bench/results/locale-wait-fit.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import DATASETS_DIR, EVAL_DATA, RESULTS_DIR, SCRATCH_DIR
from bench.common.processes import Stack
from bench.common.record import run_record
from bench.common.retrieve_loop import run_load
from bench.eval.bilingual import SCOPE as BILINGUAL_SCOPE
from bench.eval.bilingual import index_dir
from bench.eval.bilingual_data import BilingualDataset
from bench.eval.third_party import SCOPE as THIRD_PARTY_SCOPE
from bench.eval.third_party_data import read_queries
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

RESULTS_FILE = "locale-wait-fit.json"
DEPTH = 30
OFF = 2.0
GAPS = (0.05, 0.08, 0.1, 0.12, 0.15, 0.18, 0.2, 0.25, 0.3, OFF)
ENV = {"RAG_LOCALE_WAIT_GAP": str(OFF), "RAG_METRICS_ENABLED": "false"}
_BEST = re.compile(r"(\S+) best cross-lingual cosine (-?[\d.]+)")
_LEADS = re.compile(r"(\S+) leads")


@dataclass(frozen=True)
class Question:
    id: str
    group: str  # the bilingual kind, or "third_party"
    split: str
    text: str
    relevant: frozenset[str]
    must_contain: str = ""


@dataclass(frozen=True)
class Hit:
    doc_id: str
    locale: str
    exact: bool  # holds one of the question's exact identifiers
    contains: bool  # holds the question's `must_contain`


@dataclass(frozen=True)
class Answer:
    hits: tuple[Hit, ...]
    leader: str  # "" when the locales were not ranked by cross-lingual evidence
    best: dict[str, float]  # each locale's best cross-lingual cosine, from the notes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.eval.locale_wait_fit")
    p.add_argument("--bilingual-index", type=Path, default=index_dir(EVAL_DATA, "bilingual", {}))
    default_tp = index_dir(EVAL_DATA, "third-party-300", {})
    p.add_argument("--third-party-index", type=Path, default=default_tp)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    record = run_record(["-m", "bench.eval.locale_wait_fit", *(argv or sys.argv[1:])])
    bilingual = [
        Question(q.id, q.kind, q.split, q.text, q.relevant_docs, q.must_contain)
        for q in BilingualDataset(DATASETS_DIR / "bilingual").queries()
    ]
    third_party = [
        Question(q.id, "third_party", q.split, q.text, frozenset(q.relevant))
        for q in read_queries(DATASETS_DIR / "third_party" / "queries.jsonl")
    ]
    answers = {
        **collect(bilingual, args.bilingual_index, BILINGUAL_SCOPE, per_document=0),
        **collect(third_party, args.third_party_index, THIRD_PARTY_SCOPE, per_document=1),
    }
    questions = [*bilingual, *third_party]
    grid = [{"gap": gap, **score(questions, answers, gap)} for gap in GAPS]
    chosen = choose(grid)
    result = {**record, "depth": DEPTH, "env": ENV, "grid": grid, "chosen": chosen["gap"]}
    path = RESULTS_DIR / RESULTS_FILE
    path.write_text(json.dumps(result, indent=2) + "\n")
    for point in grid:
        print(point["gap"], _line(point, "train"), "| test", _line(point, "test"))
    print(f"chosen gap {chosen['gap']}; wrote {path}")
    return 0


def collect(
    questions: Sequence[Question], data_dir: Path, scope: str, per_document: int
) -> dict[str, Answer]:
    if not (data_dir / "manifest.sqlite3").is_file():
        raise SystemExit(f"{data_dir}: no index; run the set's evaluation first")
    log_dir = SCRATCH_DIR / "logs" / "locale-wait-fit"
    stack = Stack.start(data_dir, log_dir, ENV, log_name=f"stack-{scope}.log")
    try:

        def make_request(text: str) -> pb.RetrieveRequest:
            return pb.RetrieveRequest(
                query=text,
                top_k=DEPTH,
                max_chunks_per_document=per_document,
                filter=pb.ScopeFilter(scope_id=scope),
                disable_rerank=True,
                debug=True,
            )

        load = run_load(stack.retriever_addr, [(q.id, q.text) for q in questions], make_request)
    finally:
        stack.stop()
    by_id = {q.id: q for q in questions}
    return {
        a.query_id: answer_of(a.response, by_id[a.query_id].must_contain)
        for a in load.answers
        if a.response
    }


def answer_of(response: pb.RetrieveResponse, must_contain: str) -> Answer:
    wanted = must_contain.casefold()
    hits = tuple(
        Hit(
            h.doc_id,
            h.locale,
            bool(h.exact_identifiers),
            bool(wanted) and wanted in h.text.casefold(),
        )
        for h in response.hits
    )
    for note in response.debug.notes:
        if "locales in turns" in note and (lead := _LEADS.search(note)):
            best = {locale: float(cosine) for locale, cosine in _BEST.findall(note)}
            if lead.group(1) in best:
                return Answer(hits, lead.group(1), best)
    return Answer(hits, "", {})


def replayed(answer: Answer, gap: float) -> tuple[Hit, ...]:
    """The answer with every locale more than `gap` below the leader after the rest."""
    if not answer.leader or not answer.hits:
        return answer.hits
    lead = answer.best[answer.leader]
    waiting = {locale for locale, best in answer.best.items() if lead - best > gap}
    first = answer.hits[:1] if answer.hits[0].exact else ()
    rest = answer.hits[len(first) :]
    return (
        *first,
        *(h for h in rest if h.locale not in waiting),
        *(h for h in rest if h.locale in waiting),
    )


def score(questions: Sequence[Question], answers: dict[str, Answer], gap: float) -> dict[str, Any]:
    """hit@1, top 3 and MRR@10 per split and group, and how many lists waited."""
    sums: dict[str, dict[str, list[tuple[bool, bool, float, bool]]]] = {
        "train": defaultdict(list),
        "test": defaultdict(list),
    }
    for q in questions:
        if q.id not in answers:
            continue
        hits = replayed(answers[q.id], gap)
        docs = [h.doc_id for h in hits]
        first = (
            hits[0].contains if q.must_contain and hits else bool(docs) and docs[0] in q.relevant
        )
        top3 = any(d in q.relevant for d in docs[:3])
        rr = next((1 / r for r, d in enumerate(docs[:10], 1) if d in q.relevant), 0.0)
        changed = hits != answers[q.id].hits
        sums[q.split][q.group].append((first, top3, rr, changed))
    return {
        split: {
            group: {
                "n": len(rows),
                "hit@1": round(sum(r[0] for r in rows) / len(rows), 4),
                "top3": round(sum(r[1] for r in rows) / len(rows), 4),
                "mrr@10": round(sum(r[2] for r in rows) / len(rows), 4),
                "reordered": int(sum(r[3] for r in rows)),
            }
            for group, rows in sorted(groups.items())
        }
        for split, groups in sums.items()
    }


def choose(grid: list[dict[str, Any]]) -> dict[str, Any]:
    off = next(p for p in grid if p["gap"] == OFF)

    def keeps(point: dict[str, Any]) -> bool:
        return all(
            point["train"][group][metric] >= off["train"][group][metric]
            for group in off["train"]
            for metric in ("hit@1", "top3", "mrr@10")
        )

    def gain(point: dict[str, Any]) -> float:
        return sum(point["train"][g]["top3"] - off["train"][g]["top3"] for g in off["train"])

    admissible = [p for p in grid if keeps(p)]
    return max(admissible, key=lambda p: (round(gain(p), 4), p["gap"]))


def _line(point: dict[str, Any], split: str) -> str:
    rows = point[split]
    return " ".join(
        f"{g}={rows[g]['hit@1']:.3f}/{rows[g]['top3']:.3f}/{rows[g]['mrr@10']:.3f}" for g in rows
    )


if __name__ == "__main__":
    sys.exit(main())
