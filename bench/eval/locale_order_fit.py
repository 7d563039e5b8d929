"""Fit the locale-order rule (services/retriever/locale_order.py) on the
bilingual set's TRAIN split: which locale's list leads the turns.

Starts the embedded stack on the bilingual index, sends every query once
through `Retrieve` (hybrid, reranking off, the question-first order:
RAG_LOCALE_ORDER=question_first, top 30, debug), and splits each answer back
into its locale lists (taking turns keeps each list's own order). Then
replays candidate thresholds offline: for each, the lead locale of each
query as the rule would choose it from those lists' heads, the turns
re-taken, exact-identifier precedence re-applied, and hit@1 / top 3 scored
per kind on the train split. The chosen threshold is the one with the best
train hit@1 over all kinds among those that keep every kind's train top 3
and identifier exact@1 at least at question-first's; ties go to the
largest margin (the most conservative rule). The test split is replayed
too, for information only: the figures of record come from
`python -m bench.eval.bilingual`.

    python -m bench.eval.locale_order_fit           # writes bench/results/locale-order-fit.json
    python -m bench.eval.locale_order_fit --reuse   # replay the last collected answers

With `--cross-lingual` the index carries the second vector
(RAG_CROSS_LINGUAL_MODEL=packaged:muse-v3, the bilingual evaluation's index
of that variant) and the replay weighs each locale's best cosine in that
channel against the cross-lingual margins
(RAG_LOCALE_ORDER_CROSS_LINGUAL_MARGIN); it writes
bench/results/locale-order-fit-cross-lingual.json.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common.indexing import sync_documents
from bench.common.paths import DATASETS_DIR, EVAL_DATA, RESULTS_DIR, SCRATCH_DIR
from bench.common.processes import Stack
from bench.common.record import run_record
from bench.common.retrieve_loop import run_load
from bench.eval.bilingual import SCOPE, index_dir
from bench.eval.bilingual_data import BilingualDataset, Query
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.analysis import primary_language
from services.retriever.locale_order import HeadEvidence, LocaleOrderRule

RESULTS_FILE = "locale-order-fit.json"
ANSWERS = SCRATCH_DIR / "locale-order-answers.json"  # git-ignored
DEPTH = 30
MARGINS = (-0.02, 0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 9.0)
CROSS_LINGUAL_ENV = {"RAG_CROSS_LINGUAL_MODEL": "packaged:muse-v3"}
CROSS_LINGUAL_RESULTS_FILE = "locale-order-fit-cross-lingual.json"
CROSS_LINGUAL_ANSWERS = SCRATCH_DIR / "locale-order-answers-cross-lingual.json"
CROSS_LINGUAL_MARGINS: tuple[float, ...] = (-0.12, -0.1, -0.08, -0.06, -0.05, -0.04, -0.03)
CROSS_LINGUAL_MARGINS += (-0.02, -0.01, 0.0, 0.02, 0.05, 2.0)


@dataclass(frozen=True)
class FitShape:
    """What one fit collects and replays: the default index, or the one
    with the cross-lingual second vector."""

    env: dict[str, str]
    answers: Path
    results_file: str
    margins: tuple[float, ...]
    cross_lingual: bool


DEFAULT_FIT = FitShape({}, ANSWERS, RESULTS_FILE, MARGINS, False)
CROSS_LINGUAL_FIT = FitShape(
    CROSS_LINGUAL_ENV,
    CROSS_LINGUAL_ANSWERS,
    CROSS_LINGUAL_RESULTS_FILE,
    CROSS_LINGUAL_MARGINS,
    True,
)


@dataclass(frozen=True)
class Seen:
    """One hit of an answer, as the replay needs it."""

    doc_id: str
    locale: str
    text: str
    cosine: float | None
    lexical: bool  # found by the lexical channel (own words, translation or identifier)
    exact: int  # how many of the question's identifiers it holds
    cross_lingual: float | None = None  # its cosine in the cross-lingual channel
    twins: tuple[str, ...] = ()  # the languages its page exists in besides its own


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    record = run_record(["-m", "bench.eval.locale_order_fit", *argv])
    shape = CROSS_LINGUAL_FIT if "--cross-lingual" in argv else DEFAULT_FIT
    dataset = BilingualDataset(DATASETS_DIR / "bilingual")
    queries = dataset.queries()
    answers = collected(dataset, queries, shape, reuse="--reuse" in argv)
    grid = [replay(queries, answers, margin, shape.cross_lingual) for margin in shape.margins]
    baseline = grid[-1]  # a margin no cosine gap reaches: the question's language first
    chosen = choose(grid, baseline)
    result = {**record, "depth": DEPTH, "env": shape.env, "grid": grid, "chosen": chosen}
    path = RESULTS_DIR / shape.results_file
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    for point in grid:
        print(point["margin"], point["train"]["all"], point["test"]["all"])
    print(f"chosen margin {chosen['margin']}; wrote {path}")
    return 0


def collected(
    dataset: BilingualDataset, queries: list[Query], shape: FitShape, reuse: bool
) -> dict[str, list[Seen]]:
    """The answers of the question-first run: collected again, or (`--reuse`)
    read from the last collection, so a new rule replays in seconds."""
    if reuse and shape.answers.is_file():
        saved = json.loads(shape.answers.read_text())
        return {qid: [Seen(**hit) for hit in hits] for qid, hits in saved.items()}
    answers = collect(dataset, queries, shape.env)
    shape.answers.parent.mkdir(parents=True, exist_ok=True)
    dumped = {q: [asdict(h) for h in hits] for q, hits in answers.items()}
    shape.answers.write_text(json.dumps(dumped))
    return answers


def collect(
    dataset: BilingualDataset, queries: list[Query], variant_env: dict[str, str]
) -> dict[str, list[Seen]]:
    """`variant_env`: the bilingual evaluation's variant whose index is used."""
    documents, _ = dataset.documents(SCOPE)
    env = {**variant_env, "RAG_LOCALE_ORDER": "question_first"}
    data_dir = index_dir(EVAL_DATA, dataset.name, variant_env)
    stack = Stack.start(data_dir, SCRATCH_DIR / "logs" / "locale-order-fit", env)
    try:
        sync_documents(stack.indexer_addr, documents, SCOPE)

        def make_request(text: str) -> pb.RetrieveRequest:
            scope = pb.ScopeFilter(scope_id=SCOPE)
            return pb.RetrieveRequest(
                query=text, top_k=DEPTH, filter=scope, disable_rerank=True, debug=True
            )

        load = run_load(stack.retriever_addr, [(q.id, q.text) for q in queries], make_request)
    finally:
        stack.stop()
    return {a.query_id: [seen(hit) for hit in a.response.hits] for a in load.answers if a.response}


def seen(hit: pb.Hit) -> Seen:
    cosine = next((c.score for c in hit.channels if c.channel == pb.CHANNEL_VECTOR), None)
    lexical = any(c.channel == pb.CHANNEL_LEXICAL for c in hit.channels)
    crossing = (c.score for c in hit.channels if c.channel == pb.CHANNEL_CROSS_LINGUAL)
    exact = len(hit.exact_identifiers)
    twins = tuple(sorted({primary_language(t.locale) for t in hit.translations}))
    crossed = next(crossing, None)
    return Seen(hit.doc_id, hit.locale, hit.text, cosine, lexical, exact, crossed, twins)


def replay(
    queries: list[Query], answers: dict[str, list[Seen]], margin: float, cross_lingual: bool
) -> dict[str, Any]:
    """`cross_lingual`: `margin` is the cross-lingual channel's."""
    if cross_lingual:
        rule = LocaleOrderRule(cross_lingual_margin=margin)
    else:
        rule = LocaleOrderRule(margin=margin)
    scored: dict[str, dict[str, list[tuple[bool, bool]]]] = {"train": {}, "test": {}}
    led_by_other = 0
    for query in queries:
        hits = answers.get(query.id, [])
        order, other_leads = reordered(rule, query, hits)
        led_by_other += other_leads and query.split == "train"
        outcome = (hit_at_1(query, order), any(h.doc_id in query.relevant_docs for h in order[:3]))
        for group in (query.kind, "all"):
            scored[query.split].setdefault(group, []).append(outcome)
    return {
        "margin": margin,
        "train_queries_led_by_another_locale": led_by_other,
        **{split: _means(groups) for split, groups in scored.items()},
    }


def reordered(rule: LocaleOrderRule, query: Query, hits: list[Seen]) -> tuple[list[Seen], bool]:
    """The answer with its locale lists re-taken in the rule's order."""
    from services.core.analysis import detect_language
    from services.retriever.locale_turns import interleaved

    lists: dict[str, list[Seen]] = {}
    for hit in hits:
        lists.setdefault(hit.locale, []).append(hit)
    language = detect_language(query.text)  # as the Retriever detects it
    heads = {
        locale: HeadEvidence(
            locale,
            found[0].cosine or 0.0,
            found[0].lexical,
            cross_lingual=_best_crossing(found),
            twins=frozenset(found[0].twins),
        )
        for locale, found in lists.items()
    }
    decision = rule.order(heads, language)
    merged = interleaved([lists[locale] for locale in decision.locales])
    merged.sort(key=lambda hit: -hit.exact)  # exact-identifier precedence (stable)
    return merged, decision.other_language_leads


def _best_crossing(hits: list[Seen]) -> float | None:
    """The locale's best cross-lingual cosine among the answer's hits (the
    Retriever reads it from the channel's own list, which the answer's top
    30 nearly always holds on this small index)."""
    found = [hit.cross_lingual for hit in hits if hit.cross_lingual is not None]
    return max(found) if found else None


def hit_at_1(query: Query, hits: Sequence[Seen]) -> bool:
    if not hits:
        return False
    if query.must_contain:
        return query.must_contain.casefold() in hits[0].text.casefold()
    return hits[0].doc_id in query.relevant_docs


def _means(groups: dict[str, list[tuple[bool, bool]]]) -> dict[str, dict[str, float]]:
    return {
        group: {
            "queries": len(found),
            "hit@1": round(sum(h for h, _ in found) / len(found), 4),
            "top3": round(sum(t for _, t in found) / len(found), 4),
        }
        for group, found in groups.items()
    }


def choose(grid: list[dict[str, Any]], baseline: dict[str, Any]) -> dict[str, Any]:
    """Best train hit@1 over all queries without lowering any kind's train
    top 3 or hit@1 of the identifier kinds; ties: the largest margin."""

    def keeps(point: dict[str, Any]) -> bool:
        for kind, before in baseline["train"].items():
            after = point["train"][kind]
            if after["top3"] < before["top3"]:
                return False
            if kind.startswith("identifier") and after["hit@1"] < before["hit@1"]:
                return False
        return True

    allowed = [point for point in grid if keeps(point)]
    return max(allowed, key=lambda p: (p["train"]["all"]["hit@1"], p["margin"]))


if __name__ == "__main__":
    sys.exit(main())
