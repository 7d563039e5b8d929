"""`python -m bench.eval.rerank_rules`: how many candidates the cross-encoder
should read and how its scores should be combined with fusion, fitted on the
train splits of every evaluation set at once and reported on their test splits.

`dump` starts the default Reranker and an embedded stack on an index an
evaluation already built (SciFact: `bench.eval.scifact`; the third-party
questions: `bench.eval.third_party`; the bilingual set: `bench.eval.bilingual`)
and sends every query of the set through `Retrieve` twice, with the eval's own
request shape (top 20; one chunk per document, or the server's default for the
bilingual set, as its eval asks): once with reranking off (the
fused order the server serves, locale order and identifier precedence
included) and once with the Reranker scoring all 20 under a budget no caller
has (so every readable candidate has its score). One JSON line per query.

`fit` replays any rule offline from those lines with the Retriever's own
ordering code (`services.retriever.fusion.reranked_order`): a scored prefix of
N candidates, the blend's weights, and a confidence gate (the cross-encoder
may reorder only when its best score among the scored beats the fused first's
by a margin). Scores per set and split: hit@1, MRR@10, nDCG@10 (document
level). A rule is admissible when no set's train split is worse than fusion
alone on any of the three, and servable whole within the default rerank budget
on a slow day (SERVABLE_CANDIDATES); among them, those within NOISE of the
largest gain in train MRR@10 summed over the sets tie, and the one that scores
the fewest candidates wins (each is a forward pass on every request). The test rows use
the chosen constants.

    python -m bench.eval.rerank_rules dump --set third_party [--model packaged:…]
    python -m bench.eval.rerank_rules fit [--model packaged:…]
    python -m bench.eval.rerank_rules dump|fit … --max-length 256   # another input length

`--model` (default: the Reranker's default) names the reranking model whose
scores are dumped and fitted; each model's dumps and fit file are its own,
and the gates of its grid are in its own score units (GATES).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import DATASETS_DIR, EVAL_DATA, RESULTS_DIR, SCRATCH_DIR
from bench.common.processes import Stack, start_reranker
from bench.common.record import run_record
from bench.common.retrieve_loop import run_load
from bench.eval.bilingual import index_dir
from bench.eval.dataset import BeirDataset, Qrels
from bench.eval.metrics import evaluate
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.embedding.packaged_files import COLBERT
from services.reranker.settings import DEFAULT_MODEL
from services.retriever.fusion import FITTED_RERANK, RerankBlend, reranked_order

DUMP_DIR = SCRATCH_DIR / "rerank-rules"
# The gates each model's grid tries, in its score units. The cross-encoder's
# scores are logits (4: about 55 to 1 in odds). ColBERT's are sums of cosines
# over the question's tokens: candidates of one question lie within a few
# tenths to a few units of each other (bench/results/notes/late_interaction.md).
GATES = {
    DEFAULT_MODEL: (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0),
    COLBERT.alias: (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
}
# Candidate counts tried; ColBERT's reach down to what its cost serves whole.
CANDIDATES = {DEFAULT_MODEL: (4, 6, 8, 10, 15, 20), COLBERT.alias: (2, 3, 4, 6, 8, 10, 15, 20)}
DEPTH = 20
SETS = ("scifact", "third_party", "bilingual")
MEASURES = ("hit@1", "mrr@10", "ndcg@10")
# Summed train MRR@10 gains closer than this to the best count as a tie, won
# by the rule that scores fewer candidates (as bench.eval.channel_weight_fit
# breaks its ties toward the simpler point).
NOISE = 0.005
# The most candidates a default rule may score: what the default rerank budget
# (400 ms) holds whole at 1.5x the cost of a pair (the Reranker's own start
# rule, services/reranker/batch_cost.py) on a slow day of this 2-core machine
# (~45 ms a pair, 2026-12-01). 8 candidates left the `make run` demo answer
# partial that day (5 of 8 scored).
SERVABLE_CANDIDATES = 5
# ColBERT reads a passage at 256 tokens (128 halved its gain) and
# costs ~2.3x a cross-encoder pair at 128 (interleaved in one process,
# 2026-12-02): the default budget holds 2 of its pairs whole, too few to gain
# anything. It is a choice an operator makes with a larger budget
# (RAG_RERANK_BUDGET_MS), so its rule is fitted without the cap.
SERVABLE = {DEFAULT_MODEL: SERVABLE_CANDIDATES, COLBERT.alias: DEPTH}


@dataclass(frozen=True)
class EvalSet:
    name: str
    data_dir: Path
    scope: str
    queries: list[tuple[str, str, str]]  # id, text, split
    qrels: Qrels
    env: dict[str, str]
    depth: int = 0  # candidates per channel the eval asks for (0: the server's default)
    per_document: int = 1  # chunks per document the eval asks for (0: the server's default)


def load_set(name: str) -> EvalSet:
    """The set's queries, judgments and index as its own evaluation made them."""
    if name == "scifact":  # the index, settings and depth `bench.eval.scifact` uses
        from bench.eval.scifact_options import parse_args

        opts = parse_args(["--no-peer", "--no-finetuned", "--no-compare-models"], "")
        splits = [BeirDataset(opts.dataset.root, split) for split in ("train", "test")]
        queries = [(q, t, d.split) for d in splits for q, t in d.queries().items()]
        judged = {**splits[0].qrels(), **splits[1].qrels()}
        return EvalSet(name, opts.data_dir, "eval", queries, judged, opts.stack_env, opts.depth)
    if name == "third_party":
        from bench.eval.third_party_data import qrels, read_queries

        found = read_queries(DATASETS_DIR / "third_party" / "queries.jsonl")
        return EvalSet(
            name,
            _default_index("third-party-300"),
            "third-party-docs",
            [(q.id, q.text, q.split) for q in found],
            qrels(found),
            {},
        )
    from bench.eval.bilingual_data import BilingualDataset

    data = BilingualDataset((DATASETS_DIR / "bilingual").resolve()).queries()
    return EvalSet(
        name,
        _default_index("bilingual"),
        "bilingual",
        [(q.id, q.text, q.split) for q in data],
        {q.id: dict(q.relevant) for q in data},
        {},
        per_document=0,
    )


def _default_index(name: str) -> Path:
    """The index the set's evaluation builds with no `--env` (one with `--env`
    settings is another folder, and may index otherwise)."""
    path = index_dir(EVAL_DATA, name, {})
    if not path.is_dir():
        raise SystemExit(f"no index {path}: run the set's evaluation first")
    return path


def model_files(model: str, max_length: int = 0) -> tuple[Path, Path]:
    """Where `model`'s dumps go and its fit is written (the default model's
    keep the names they always had); another input length than the model's
    own (`max_length`) has its own dumps and fit file."""
    dumps, fit_name = DUMP_DIR, "rerank-rules-fit"
    if model != DEFAULT_MODEL:
        slug = model.removeprefix("packaged:")
        dumps, fit_name = DUMP_DIR / slug, f"{fit_name}-{slug}"
    if max_length:
        dumps, fit_name = dumps / f"tokens-{max_length}", f"{fit_name}-{max_length}-tokens"
    return dumps, RESULTS_DIR / f"{fit_name}.json"


def dump(name: str, model: str = DEFAULT_MODEL, depth: int = DEPTH, max_length: int = 0) -> Path:
    """Every query's fused top DEPTH, and the model's scores of its first
    `depth` (fewer saves a slow model's time; the fit then tries no rule that
    reads deeper), read at `max_length` tokens (0: the model's own)."""
    evalset = load_set(name)
    dump_dir = model_files(model, max_length)[0]
    log_dir = dump_dir / "logs" / name
    # Every candidate scored, however slow the model: no cap on the call.
    reranker_env = {"RAG_RERANK_DEFAULT_DEADLINE_MS": "600000"}
    if max_length:
        reranker_env["RAG_RERANK_MAX_LENGTH"] = str(max_length)
    reranker, why_not = start_reranker(model, log_dir, reranker_env)
    if reranker is None:
        raise SystemExit(why_not)
    env = {
        **evalset.env,
        "RAG_RERANKER_ADDR": reranker.addr,
        "RAG_RERANK_MODEL": model,  # the Retriever reads it too: the model's languages
        "RAG_RERANK_CANDIDATES": str(depth),
        "RAG_RERANK_BUDGET_MS": "60000",
        "RAG_DEFAULT_DEADLINE_MS": "120000",
    }
    stack = Stack.start(evalset.data_dir, log_dir, env)
    try:
        pairs = [(qid, text) for qid, text, _ in evalset.queries]
        fused = _answers(stack.retriever_addr, pairs, evalset, rerank=False)
        scored = _answers(stack.retriever_addr, pairs, evalset, rerank=True)
    finally:
        stack.stop()
        reranker.stop()
    path = dump_dir / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for qid, _, split in evalset.queries:
            scores = {h.chunk_id: h.rerank_score for h in scored[qid].hits if h.reranked}
            hits = [[h.doc_id, h.chunk_id, len(h.exact_identifiers)] for h in fused[qid].hits]
            row = {"id": qid, "split": split, "hits": hits, "scores": scores, "scored": depth}
            out.write(json.dumps(row))
            out.write("\n")
    print(f"{len(evalset.queries)} queries -> {path}")
    return path


def _answers(
    addr: str, pairs: list[tuple[str, str]], evalset: EvalSet, rerank: bool
) -> dict[str, pb.RetrieveResponse]:
    def make_request(text: str) -> pb.RetrieveRequest:
        return pb.RetrieveRequest(
            query=text,
            top_k=DEPTH,
            max_chunks_per_document=evalset.per_document,
            filter=pb.ScopeFilter(scope_id=evalset.scope),
            disable_rerank=not rerank,
            candidates_per_channel=evalset.depth,
        )

    load = run_load(addr, pairs, make_request, timeout_s=120)
    missing = [a.query_id for a in load.answers if a.response is None]
    if missing:
        raise SystemExit(f"{len(missing)} queries unanswered ({load.errors}), e.g. {missing[:3]}")
    return {a.query_id: a.response for a in load.answers if a.response is not None}


@dataclass(frozen=True)
class Rule:
    """N candidates scored, ordered by `blend` (its gate included) as the
    Retriever orders them."""

    candidates: int
    blend: RerankBlend | None  # None: fusion alone

    def label(self) -> str:
        if self.blend is None:
            return "fusion alone"
        gate = f", gate {self.blend.gate:g}" if self.blend.gate > 0 else ""
        return (
            f"{self.candidates} candidates, fused weight {self.blend.fused_weight:g}, "
            f"k {self.blend.k:g}{gate}"
        )

    def order(self, row: dict[str, Any]) -> list[str]:
        hits = row["hits"]
        scores = {
            i: row["scores"][h[1]]
            for i, h in enumerate(hits[: self.candidates])
            if h[1] in row["scores"]
        }
        positions = list(range(len(hits)))
        if self.blend is not None:
            positions = reranked_order(len(hits), scores, self.blend)
        positions = _lead(positions, hits)
        return [hits[p][0] for p in positions]


def _lead(positions: list[int], hits: list[list[Any]]) -> list[int]:
    """Identifier precedence (lead): the best hit holding the most identifiers first."""
    most = max((hits[p][2] for p in positions), default=0)
    if most == 0:
        return positions
    leader = next(p for p in positions if hits[p][2] == most)
    return [leader, *(p for p in positions if p != leader)]


def score(rule: Rule, rows: list[dict[str, Any]], qrels: Qrels, split: str) -> dict[str, float]:
    chosen = [r for r in rows if r["split"] == split and r["id"] in qrels]
    run = {r["id"]: _distinct(rule.order(r)) for r in chosen}
    figures = evaluate({r["id"]: qrels[r["id"]] for r in chosen}, run)
    return {m: figures[m] for m in MEASURES}


def _distinct(docs: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(docs))


def grid(model: str = DEFAULT_MODEL) -> Iterator[Rule]:
    """Gate 0 is no gate: the best score always reaches the first's. The
    cross-encoder's gates above 4 were added when the 67-question third-party
    train split chose the grid's edge (4)."""
    for n, fused_weight, k, gate in itertools.product(
        CANDIDATES[model],
        (0.0, 0.5, 1.0, 2.0, 3.0, 4.0),
        (1.0, 10.0, 30.0),
        GATES[model],
    ):
        yield Rule(n, RerankBlend(fused_weight, 1.0, k, gate))


def cheapest_near_best(
    ranked: list[tuple[bool, float, Rule]], servable: int = SERVABLE_CANDIDATES
) -> Rule | None:
    """Among admissible rules that score at most `servable` candidates and whose
    train gain is within NOISE of the best of those, the one that scores the
    fewest candidates (each costs a forward pass on every request); then the
    larger gain. None: no rule is admissible."""
    admissible = [
        (gain, rule) for ok, gain, rule in ranked if ok and gain > 0 and rule.candidates <= servable
    ]
    if not admissible:
        return None
    best = max(gain for gain, _ in admissible)
    near = [(gain, rule) for gain, rule in admissible if gain >= best - NOISE]
    return min(near, key=lambda pair: (pair[1].candidates, -pair[0]))[1]


def fit(sets: Sequence[str], model: str = DEFAULT_MODEL, max_length: int = 0) -> dict[str, Any]:
    """The grid replayed on every set's train split; the chosen rule, the
    runners-up, fusion alone and the Retriever's current rule for `model` on
    both splits."""
    data = {}
    dump_dir = model_files(model, max_length)[0]
    for name in sets:
        rows = [json.loads(line) for line in (dump_dir / f"{name}.jsonl").read_text().splitlines()]
        data[name] = (rows, load_set(name).qrels)

    def figures(rule: Rule, split: str) -> dict[str, dict[str, float]]:
        return {name: score(rule, rows, qrels, split) for name, (rows, qrels) in data.items()}

    base = Rule(DEPTH, None)
    floor = figures(base, "train")
    ranked = []
    depth = min(row.get("scored", DEPTH) for rows, _ in data.values() for row in rows)
    for rule in (rule for rule in grid(model) if rule.candidates <= depth):
        train = figures(rule, "train")
        worse = any(train[n][m] < floor[n][m] for n in train for m in MEASURES)
        gain = sum(train[n]["mrr@10"] - floor[n]["mrr@10"] for n in train)
        ranked.append((not worse, round(gain, 4), rule))
    ranked.sort(key=lambda r: (r[0], r[1]), reverse=True)
    fitted = FITTED_RERANK.get(model, FITTED_RERANK[DEFAULT_MODEL])
    current = Rule(fitted.candidates, fitted.blend)
    rows = [("fusion alone", base), ("current default", current)]
    chosen = cheapest_near_best(ranked, SERVABLE[model])
    if chosen is not None:
        rows.append((f"chosen: servable, the fewest candidates within {NOISE} of the best", chosen))
    rows += [
        (f"#{n} {'admissible' if ok else 'worse somewhere'}, train MRR@10 +{gain}", rule)
        for n, (ok, gain, rule) in enumerate(ranked[:10], 1)
    ]
    return {
        "model": model,
        "max_length": max_length or "the model's own",
        "sets": list(sets),
        "grid_points": len(ranked),
        "rules": [
            {
                "what": what,
                "rule": rule.label(),
                "train": figures(rule, "train"),
                "test": figures(rule, "test"),
            }
            for what, rule in rows
        ],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.eval.rerank_rules", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    dump_args, fit_args = sub.add_parser("dump"), sub.add_parser("fit")
    dump_args.add_argument("--set", choices=SETS, required=True)
    dump_args.add_argument("--scored", type=int, default=DEPTH, help="candidates scored")
    fit_args.add_argument("--sets", nargs="+", default=list(SETS))
    for each in (dump_args, fit_args):
        each.add_argument("--model", choices=sorted(GATES), default=DEFAULT_MODEL)
        each.add_argument(
            "--max-length", type=int, default=0, help="tokens a pair is read at (0: the model's)"
        )
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "dump":
        dump(args.set, args.model, args.scored, args.max_length)
        return 0
    record = run_record(["-m", "bench.eval.rerank_rules", *sys.argv[1:]])
    result = {**record, **fit(args.sets, args.model, args.max_length)}
    fit_file = model_files(args.model, args.max_length)[1]
    fit_file.write_text(json.dumps(result, indent=1) + "\n")
    for row in result["rules"]:
        print(row["what"], "|", row["rule"])
        for split in ("train", "test"):
            print(f"  {split:5}", json.dumps(row[split]))
    print(f"wrote {fit_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
