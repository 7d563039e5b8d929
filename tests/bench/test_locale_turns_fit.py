"""The replay of evidence-gated turns (bench/eval/locale_turns_fit.py): who
takes each position once another language's hits must show evidence."""

from __future__ import annotations

import pytest

from bench.eval.locale_order_fit import Seen
from bench.eval.locale_turns_fit import (
    TODAY,
    Case,
    Context,
    Gate,
    Shape,
    gated_turns,
    reciprocal_rank,
    reordered,
)

pytestmark = pytest.mark.unit


def hit(doc: str, cosine: float | None, lexical: bool = False, locale: str = "en") -> Seen:
    return Seen(doc, locale, f"text of {doc}", cosine, lexical, 0)


EN = [hit("en1", 0.90), hit("en2", 0.86), hit("en3", 0.80), hit("en4", 0.70)]
ZH = [hit("zh1", 0.83, locale="zh"), hit("zh2", 0.85, True, "zh"), hit("zh3", 0.60, locale="zh")]


def ids(hits: list[Seen]) -> list[str]:
    return [h.doc_id for h in hits]


def test_an_open_gate_is_todays_turns_and_a_shut_one_puts_the_own_list_first() -> None:
    assert ids(gated_turns([EN, ZH], [False, True], Gate("always"), Shape())) == [
        *("en1", "zh1", "en2", "zh2", "en3", "zh3", "en4"),
    ]
    assert ids(gated_turns([EN, ZH], [False, True], Gate("never"), Shape())) == [
        *("en1", "en2", "en3", "en4", "zh1", "zh2", "zh3"),
    ]


def test_a_stalled_hit_takes_its_turn_once_the_hit_it_would_displace_scores_low_enough() -> None:
    # zh1 (0.83) against en2 (0.86) fails with h = 0.02; against en3 (0.80) it passes.
    merged = gated_turns([EN, ZH], [False, True], Gate("displace", 0.02), Shape())
    assert ids(merged) == ["en1", "en2", "zh1", "en3", "zh2", "en4", "zh3"]
    wider = gated_turns([EN, ZH], [False, True], Gate("displace", 0.04), Shape())
    assert ids(wider)[:3] == ["en1", "zh1", "en2"]


def test_pass_over_lets_a_later_hit_with_evidence_go_before_its_list_head() -> None:
    lexical = Gate("lexical")
    stalled = gated_turns([EN, ZH], [False, True], lexical, Shape())
    passed = gated_turns([EN, ZH], [False, True], lexical, Shape(pass_over=True))
    assert ids(stalled)[:5] == ["en1", "en2", "en3", "en4", "zh1"]
    assert ids(passed)[:3] == ["en1", "zh2", "en2"]


def test_the_gate_reaches_only_the_positions_its_shape_says() -> None:
    never = Gate("never")
    free_second = gated_turns([EN, ZH], [False, True], never, Shape(free_second=True))
    until_two = gated_turns([EN, ZH], [False, True], never, Shape(until=2))
    assert ids(free_second)[:3] == ["en1", "zh1", "en2"]
    assert ids(until_two)[:4] == ["en1", "en2", "zh1", "en3"]


def test_another_language_that_leads_keeps_plain_turns_unless_gated_too() -> None:
    lead = [hit("zh0", 0.95, locale="zh"), *ZH]
    assert ids(gated_turns([lead, EN], [True, False], Gate("never"), Shape()))[:3] == [
        *("zh0", "en1", "zh1"),
    ]
    gated = gated_turns([lead, EN], [True, False], Gate("never"), Shape(when_other_leads=True))
    assert ids(gated)[:5] == ["zh0", "en1", "en2", "en3", "en4"]


def test_cosine_gates_weigh_the_own_head_or_the_list_head() -> None:
    own_head = gated_turns([EN, ZH], [False, True], Gate("own_head", 0.06), Shape())
    assert ids(own_head)[:5] == ["en1", "en2", "en3", "en4", "zh1"]  # 0.83 < 0.90 - 0.06
    list_head = gated_turns([EN, ZH], [False, True], Gate("list_head", 0.0), Shape())
    assert ids(list_head)[:4] == ["en1", "zh1", "en2", "zh2"]  # zh2 0.85 >= zh1 0.83
    assert Gate("lexical|own_head", 0.0).passes(ZH[1], _ctx()) is True
    assert Gate("displace", 0.5).passes(hit("x", None, True, "zh"), _ctx()) is False


def _ctx() -> Context:
    return Context(displaced=0.86, own_head=0.90, list_head=0.83)


def test_reciprocal_rank_counts_documents_not_chunks() -> None:
    hits = [hit("a", 0.9), hit("a", 0.8), hit("b", 0.7)]
    assert reciprocal_rank(frozenset({"b"}), hits) == 0.5
    assert reciprocal_rank(frozenset({"c"}), hits) == 0.0


def test_reordered_keeps_the_lead_and_splits_an_answer_by_locale() -> None:
    answer = [EN[0], ZH[0], EN[1], ZH[1], EN[2]]  # as collected: question first, in turns
    case = Case("q", "how do I keep insertion order in a dict", "train", "k", bool, frozenset())
    assert ids(reordered(case, answer, *TODAY)) == ids(answer)
    own_first = reordered(case, answer, Gate("never"), Shape())
    assert ids(own_first) == ["en1", "en2", "en3", "zh1", "zh2"]
