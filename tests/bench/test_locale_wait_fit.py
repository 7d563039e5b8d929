"""The locale-wait replay (bench.eval.locale_wait_fit) on hand-made answers (unit)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.eval.locale_wait_fit import OFF, Answer, Hit, answer_of, choose, replayed
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

pytestmark = pytest.mark.unit


def _hit(doc: str, exact: bool = False) -> Hit:
    return Hit(doc, doc.split("/")[0], exact, False)


def test_a_locale_far_below_the_leader_moves_after_the_rest() -> None:
    hits = (_hit("en/a"), _hit("zh/x"), _hit("en/b"), _hit("zh/y"))
    answer = Answer(hits, "en", {"en": 0.5, "zh": 0.2})
    assert [h.doc_id for h in replayed(answer, 0.2)] == ["en/a", "en/b", "zh/x", "zh/y"]
    assert replayed(answer, 0.35) == hits
    assert replayed(Answer(hits, "", {}), 0.0) == hits  # not ranked by cross-lingual evidence
    exact_first = (_hit("zh/x", exact=True), _hit("en/a"), _hit("zh/y"))
    moved = replayed(Answer(exact_first, "en", {"en": 0.5, "zh": 0.2}), 0.2)
    assert [h.doc_id for h in moved] == ["zh/x", "en/a", "zh/y"]


def test_the_leader_and_each_locale_s_best_cosine_come_from_the_notes() -> None:
    note = (
        "ranked each locale apart (en, zh): vector per locale, locales in turns, en leads "
        "(question's language): zh best cross-lingual cosine 0.157 vs en best cross-lingual "
        "cosine 0.533, margin -0.08"
    )
    response = pb.RetrieveResponse(
        hits=[pb.Hit(doc_id="en/a", locale="en", text="Run git clean")],
        debug=pb.DebugReport(notes=["vector weight 3", note]),
    )
    answer = answer_of(response, must_contain="GIT CLEAN")
    assert (answer.leader, answer.best) == ("en", {"zh": 0.157, "en": 0.533})
    assert answer.hits == (Hit("en/a", "en", False, True),)


def _point(gap: float, top3: float, mrr: float = 0.5) -> dict[str, Any]:
    row = {"hit@1": 0.5, "top3": top3, "mrr@10": mrr}
    return {"gap": gap, "train": {"third_party": row, "cross_en_zh": {**row, "top3": 0.6}}}


def test_the_largest_gap_with_the_best_train_top3_gain_is_chosen() -> None:
    grid = [_point(0.05, 0.8, mrr=0.4), _point(0.1, 0.8), _point(0.2, 0.8), _point(0.3, 0.7)]
    grid.append(_point(OFF, 0.65))
    assert choose(grid)["gap"] == 0.2  # 0.05 lowers a train MRR@10: not admissible
    assert choose([_point(0.1, 0.6), _point(OFF, 0.65)])["gap"] == OFF
