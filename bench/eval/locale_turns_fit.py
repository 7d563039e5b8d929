"""Replay evidence-gated turns (services/retriever/locale_balance.py, step 3)
on the stored answers of BOTH sets, both collected question-first, top 30,
reranking off: the bilingual set's (`python -m bench.eval.locale_order_fit`)
and the third-party set's (`python -m bench.eval.third_party_answers`).

The lead stays today's (services.retriever.locale_order, margin 0.04); after
it, another language's hit takes its turn only when a `Gate` passes (lexical
agreement; its cosine against the question-language hit it would displace,
the question-language head or its own list's head, less h; ORs of these),
else its list waits until the question's language's lists run out (or as
`Shape` says). Chosen on the TRAIN splits of both sets (`choose`); test
figures are reported, never tuned on. Outcome and table:
bench/results/notes/locale_turns_gated.md.

    python -m bench.eval.locale_turns_fit   # writes bench/results/locale-turns-fit.json
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

from bench.common.paths import DATASETS_DIR, RESULTS_DIR
from bench.common.record import run_record
from bench.eval.bilingual_data import BilingualDataset
from bench.eval.locale_order_fit import ANSWERS as BILINGUAL_ANSWERS
from bench.eval.locale_order_fit import Seen, hit_at_1
from bench.eval.third_party_answers import ANSWERS as THIRD_PARTY_ANSWERS
from bench.eval.third_party_answers import QUERIES as THIRD_PARTY_QUERIES
from bench.eval.third_party_data import read_queries
from services.core.analysis import detect_language
from services.retriever.locale_balance import other_language
from services.retriever.locale_order import HeadEvidence, LocaleOrderRule
from services.retriever.locale_turns import interleaved

RESULTS_FILE = "locale-turns-fit.json"
H_GRID = (-0.02, 0.0, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.1, 0.15)


@dataclass(frozen=True)
class Context:
    """What a gate weighs another language's hit against."""

    displaced: float | None  # cosine of the question-language hit it would displace (None: none)
    own_head: float  # cosine of the question-language list's head
    list_head: float  # cosine of its own list's head


@dataclass(frozen=True)
class Gate:
    name: str  # never, always, lexical, displace, own_head, list_head, lexical|displace, ...
    h: float = 0.0

    def passes(self, hit: Seen, ctx: Context) -> bool:
        return any(_one(part, self.h, hit, ctx) for part in self.name.split("|"))

    def label(self) -> str:
        plain = self.name in ("never", "always", "lexical")
        return self.name if plain else f"{self.name} h={self.h:g}"


def _one(name: str, h: float, hit: Seen, ctx: Context) -> bool:
    if name == "always":
        return True
    if name == "lexical":
        return hit.lexical
    if name == "never" or hit.cosine is None:
        return False
    if name == "displace":
        # Nothing left to displace: pass.
        if ctx.displaced is None:
            return True
        return hit.cosine >= ctx.displaced - h
    if name == "own_head":
        return hit.cosine >= ctx.own_head - h
    if name == "list_head":
        return hit.cosine >= ctx.list_head - h
    raise ValueError(f"unknown gate {name!r}")


@dataclass(frozen=True)
class Shape:
    """Where the gate applies: from position 2 or 3 (`free_second`: another
    locale's head keeps position 2), up to `until` hits (0: until the
    question's language's lists run out); `pass_over`: a later hit of a
    stalled list that passes may go first; `when_other_leads`: gate too
    when another language's locale leads (its head stays first)."""

    free_second: bool = False
    until: int = 0
    pass_over: bool = False
    when_other_leads: bool = False


def gated_turns(
    lists: Sequence[Sequence[Seen]], other: Sequence[bool], gate: Gate, shape: Shape
) -> list[Seen]:
    """The lists (in the lead rule's order) merged in gated turns; `other`:
    whether each list is in another language than the question's."""
    if other[0] and not shape.when_other_leads:
        return interleaved([list(found) for found in lists])
    queues = [deque(found) for found in lists]
    heads = [found[0].cosine or 0.0 if found else 0.0 for found in lists]
    own_head = next((c for c, o in zip(heads, other, strict=True) if not o), 0.0)
    merged: list[Seen] = []
    while any(q for q, o in zip(queues, other, strict=True) if not o):
        for index, queue in enumerate(queues):
            if not queue:
                continue
            if not other[index] or not merged or _free(shape, len(merged)):
                merged.append(queue.popleft())
                continue
            ctx = Context(_displaced(queues, other), own_head, heads[index])
            candidates = range(len(queue)) if shape.pass_over else range(1)
            taken = next((i for i in candidates if gate.passes(queue[i], ctx)), None)
            if taken is not None:
                merged.append(queue[taken])
                del queue[taken]
    return merged + interleaved([list(q) for q in queues])


def _free(shape: Shape, placed: int) -> bool:
    """Whether the next position is outside the gate's reach."""
    return (shape.free_second and placed == 1) or (shape.until > 0 and placed >= shape.until)


def _displaced(queues: Sequence[deque[Seen]], other: Sequence[bool]) -> float | None:
    """The cosine of the next question-language hit (None: none left). One the
    vector search missed (no cosine, found by its words) is never displaced."""
    nxt = next((q[0] for q, o in zip(queues, other, strict=True) if q and not o), None)
    if nxt is None:
        return None
    return nxt.cosine if nxt.cosine is not None else 9.0


@dataclass(frozen=True)
class Case:
    """One question of either set, as the replay scores it."""

    id: str
    text: str
    split: str
    kind: str
    hit1: Callable[[Sequence[Seen]], bool]
    relevant: frozenset[str]


def reordered(case: Case, hits: Sequence[Seen], gate: Gate, shape: Shape) -> list[Seen]:
    """The answer's locale lists re-merged: the lead as today, then gated turns,
    then exact-identifier precedence (as bench.eval.locale_order_fit)."""
    lists, order, other = split(case, hits)
    if not any(other) or all(other):
        merged = interleaved([lists[locale] for locale in order])
    else:
        merged = gated_turns([lists[locale] for locale in order], other, gate, shape)
    merged.sort(key=lambda hit: -hit.exact)  # exact-identifier precedence (stable)
    return merged


def split(
    case: Case, hits: Sequence[Seen]
) -> tuple[dict[str, list[Seen]], tuple[str, ...], list[bool]]:
    """An answer's locale lists, their order by today's lead rule, and
    whether each is in another language than the question's."""
    lists: dict[str, list[Seen]] = {}
    for hit in hits:
        lists.setdefault(hit.locale, []).append(hit)
    language = _language(case.text)
    heads = {loc: HeadEvidence(loc, f[0].cosine or 0.0, f[0].lexical) for loc, f in lists.items()}
    order = LocaleOrderRule().order(heads, language).locales
    return lists, order, [other_language(language, locale) for locale in order]


def score(
    cases: Sequence[Case], answers: dict[str, list[Seen]], gate: Gate, shape: Shape
) -> dict[str, dict[str, dict[str, float]]]:
    """hit@1, top 3 and MRR@10 per split and kind (and over all kinds)."""
    found: dict[str, dict[str, list[tuple[bool, bool, float]]]] = {}
    for case in cases:
        order = reordered(case, answers.get(case.id, []), gate, shape)
        top3 = any(h.doc_id in case.relevant for h in order[:3])
        outcome = (case.hit1(order), top3, reciprocal_rank(case.relevant, order))
        for group in dict.fromkeys((case.kind, "all")):
            found.setdefault(case.split, {}).setdefault(group, []).append(outcome)
    return {
        split: {
            group: {
                "queries": len(pairs),
                "hit@1": round(sum(h for h, _, _ in pairs) / len(pairs), 4),
                "top3": round(sum(t for _, t, _ in pairs) / len(pairs), 4),
                "mrr@10": round(sum(r for _, _, r in pairs) / len(pairs), 4),
            }
            for group, pairs in sorted(groups.items())
        }
        for split, groups in sorted(found.items())
    }


def reciprocal_rank(relevant: frozenset[str], hits: Sequence[Seen], depth: int = 10) -> float:
    """1/rank of the first relevant document in the first `depth` (0: none)."""
    documents = list(dict.fromkeys(hit.doc_id for hit in hits))[:depth]
    return next((1 / (i + 1) for i, doc in enumerate(documents) if doc in relevant), 0.0)


@cache
def _language(text: str) -> str:
    return detect_language(text)  # as the Retriever detects it


def bilingual_cases() -> list[Case]:
    cases = []
    for query in BilingualDataset(DATASETS_DIR / "bilingual").queries():
        hit1 = partial(hit_at_1, query)
        cases.append(Case(query.id, query.text, query.split, query.kind, hit1, query.relevant_docs))
    return cases


def third_party_cases() -> list[Case]:
    cases = []
    for query in read_queries(THIRD_PARTY_QUERIES):
        relevant = frozenset(doc for doc, grade in query.relevant.items() if grade > 0)
        hit1 = partial(_first_relevant, relevant)
        cases.append(Case(query.id, query.text, query.split, "third_party", hit1, relevant))
    return cases


def _first_relevant(relevant: frozenset[str], hits: Sequence[Seen]) -> bool:
    return bool(hits) and hits[0].doc_id in relevant


def read_answers(path: Path) -> dict[str, list[Seen]]:
    saved = json.loads(path.read_text())
    return {qid: [Seen(**hit) for hit in hits] for qid, hits in saved.items()}


TODAY = (Gate("always"), Shape())  # plain turns after the lead
OWN_FIRST = (Gate("never"), Shape())  # the question's language's list wholly, after the lead
OWN_FIRST_ALWAYS = (Gate("never"), Shape(when_other_leads=True))  # ... behind any lead's head


def variants() -> list[tuple[Gate, Shape]]:
    """The grid, simplest first (the tie-break of `choose`)."""
    gates = [Gate("never"), Gate("lexical")] + [
        Gate(name, h)
        for name in ("displace", "own_head", "list_head", "lexical|displace", "lexical|own_head")
        for h in H_GRID
    ]
    shapes = [
        Shape(free_second, until, pass_over, when_other_leads)
        for when_other_leads in (False, True)
        for pass_over in (False, True)
        for free_second, until in ((False, 0), (True, 0), (False, 2))
    ]
    return [TODAY, OWN_FIRST, OWN_FIRST_ALWAYS] + [(g, s) for g in gates for s in shapes]


Sets = dict[str, tuple[list[Case], dict[str, list[Seen]]]]


def replay(sets: Sets) -> list[dict[str, Any]]:
    grid = []
    for gate, shape in variants():
        point: dict[str, Any] = {"gate": gate.name, "h": gate.h, "label": gate.label()}
        point["shape"] = asdict(shape)
        for name, (cases, answers) in sets.items():
            point[name] = score(cases, answers, gate, shape)
        grid.append(point)
    return grid


def position_two(sets: Sets) -> dict[str, Any]:
    """What evidence the hit today's turns put at position 2 carries, per set
    and kind, when the question's language leads: how often the lexical
    channel found it, and its cosine less that of the own hit it displaces
    (quartiles), apart for heads that answer the question and those that
    do not."""
    gaps: dict[str, dict[str, list[float]]] = {}
    lexical: dict[str, int] = {}
    for name, (cases, answers) in sets.items():
        for case in cases:
            lists, order, is_other = split(case, answers.get(case.id, []))
            if is_other != [False, True] or len(lists[order[0]]) < 2:
                continue
            own, other = lists[order[0]], lists[order[1]]
            if own[1].cosine is None:
                continue
            key = f"{name}/{case.kind}"
            answers_it = "relevant" if other[0].doc_id in case.relevant else "not relevant"
            gap = (other[0].cosine or 0.0) - own[1].cosine
            gaps.setdefault(key, {}).setdefault(answers_it, []).append(round(gap, 3))
            lexical[key] = lexical.get(key, 0) + other[0].lexical
    return {
        key: {"lexical": lexical[key], **{k: _quartiles(v) for k, v in sorted(found.items())}}
        for key, found in sorted(gaps.items())
    }


def _quartiles(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    at = [ordered[round(q * (len(ordered) - 1))] for q in (0, 0.25, 0.5, 0.75, 1)]
    return {"n": len(ordered), "min_q1_median_q3_max": at}


def keeps(point: dict[str, Any], today: dict[str, Any], sets: Sets, strict: bool) -> bool:
    """No kind's train hit@1 below today's, nor either set's train top 3
    (`strict`: nor any kind's train top 3)."""
    for name in sets:
        for kind, before in today[name]["train"].items():
            after = point[name]["train"][kind]
            if after["hit@1"] < before["hit@1"]:
                return False
            if (strict or kind == "all") and after["top3"] < before["top3"]:
                return False
    return True


def train_top3(point: dict[str, Any], sets: Sets) -> float:
    """The objective: train top 3 over all of each set's questions, summed."""
    return round(sum(point[name]["train"]["all"]["top3"] for name in sets), 4)


def choose(grid: list[dict[str, Any]], sets: Sets, strict: bool) -> dict[str, Any]:
    """The best summed train top 3 among the variants `keeps` allows; ties:
    the better summed train hit@1, then the first in the grid (simplest)."""
    today = grid[0]
    allowed = [(i, p) for i, p in enumerate(grid) if keeps(p, today, sets, strict)]

    def rank(item: tuple[int, dict[str, Any]]) -> tuple[float, float, int]:
        index, point = item
        hit1 = sum(point[name]["train"]["all"]["hit@1"] for name in sets)
        return train_top3(point, sets), hit1, -index

    best = max(allowed, key=rank)
    tied = sum(rank(item)[:2] == rank(best)[:2] for item in allowed)
    return {**best[1], "tied_on_train": tied}


def compact(point: dict[str, Any]) -> dict[str, Any]:
    """A grid point on one line: [hit@1, top3, mrr@10] per set, split and kind."""
    figures = {
        name: {
            split: {group: list(f.values())[1:] for group, f in groups.items()}
            for split, groups in point[name].items()
        }
        for name in ("bilingual", "third_party")
    }
    return {"label": point["label"], "shape": point["shape"], **figures}


def row(point: dict[str, Any]) -> str:
    shape = point["shape"]
    flags = [k for k, v in shape.items() if v and k != "until"]
    flags += [f"until {shape['until']}"] if shape["until"] else []
    cells = [f"{point['label']} [{', '.join(flags)}]"]
    for name in ("bilingual", "third_party"):
        for split in ("train", "test"):
            figures = point[name][split]["all"]
            cells.append(f"{figures['hit@1']:.3f}/{figures['top3']:.3f}")
    return " | ".join(cells)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    record = run_record(["-m", "bench.eval.locale_turns_fit", *argv])
    sets: Sets = {
        "bilingual": (bilingual_cases(), read_answers(BILINGUAL_ANSWERS)),
        "third_party": (third_party_cases(), read_answers(THIRD_PARTY_ANSWERS)),
    }
    grid = replay(sets)
    chosen = choose(grid, sets, strict=False)
    strict = choose(grid, sets, strict=True)
    result = {
        **record,
        "answers": {"bilingual": str(BILINGUAL_ANSWERS), "third_party": str(THIRD_PARTY_ANSWERS)},
        "h_grid": list(H_GRID),
        "baselines": {"today": grid[0], "own_first": grid[1], "own_first_always": grid[2]},
        "chosen": chosen,
        "chosen_strict": strict,
        "position_two": position_two(sets),
        "grid_fields": "label, shape, then per set, split and kind: [hit@1, top3, mrr@10]",
    }
    path = RESULTS_DIR / RESULTS_FILE
    text = json.dumps(result, indent=1, ensure_ascii=False)[:-2]  # the grid, a line a point:
    lines = ",\n  ".join(json.dumps(compact(point), ensure_ascii=False) for point in grid)
    path.write_text(f'{text},\n "grid": [\n  {lines}\n ]\n}}\n')
    print("variant | bilingual train | test | third-party train | test  (hit@1/top3, all)")
    for point in [*grid[:3], chosen, strict]:
        print(row(point))
    print(f"chosen: {chosen['label']} {chosen['shape']} ({chosen['tied_on_train']} tied on train)")
    print(f"chosen (no kind's top 3 lower): {strict['label']} {strict['shape']}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
