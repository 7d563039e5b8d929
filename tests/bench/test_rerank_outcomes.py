"""Rerank outcome shares of a load run (bench.load.rerank_outcomes), read from
the responses the way the gateway reads them, and their table on the page."""

from __future__ import annotations

from typing import Any

import pytest

from bench.load.rerank_outcomes import outcome_shares
from bench.reports.speed import rerank_shares_section
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

pytestmark = pytest.mark.unit


def answer(reason: str = "", *, reranked: int = 0, fallback: bool = False) -> pb.RetrieveResponse:
    response = pb.RetrieveResponse(
        rerank=pb.RerankOutcome(
            used=reranked > 0, fallback=fallback, reason=reason, reranked=reranked, candidates=5
        )
    )
    if fallback:
        response.degraded.append(pb.Degradation(component="reranker", reason=reason))
    return response


ANSWERS = [
    answer(reranked=5),
    answer(reranked=5),
    answer("partial: 2 of 5 scored (deadline); rest in fused order", reranked=2, fallback=True),
    answer(
        "partial: 3 of 3 scored (sized to the time left); rest in fused order; "
        "3 of 20 candidates sent (~30 ms each, 285 ms left)",
        reranked=3,
        fallback=True,
    ),
    answer("partial: 0 of 3 scored (queue_timeout); rest in fused order", fallback=True),
    answer("reranker did not answer within 285 ms", fallback=True),
    answer("deadline too short to rerank (2 ms left)", fallback=True),
    answer("reranker UNAVAILABLE: connection refused", fallback=True),
]


def test_each_answer_is_counted_once_as_the_gateway_reads_it() -> None:
    shares = outcome_shares(ANSWERS)
    assert shares["answers"] == 8
    assert shares["counts"] == {"full": 2, "partial": 2, "timeout": 2, "other": 2}
    assert shares["shares"] == {"full": 0.25, "partial": 0.25, "timeout": 0.25, "other": 0.25}
    assert shares["degraded"] == 6


def test_no_answers_have_no_shares() -> None:
    empty = outcome_shares([])
    assert empty["answers"] == 0 and set(empty["shares"].values()) == {0.0}


def _row(mode: str, concurrency: int, outcomes: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {"mode": mode, "concurrency": concurrency}
    if mode == "rerank":
        row["rerank"] = {"mean_candidates": 4.25, "mean_reranked": 2.5}
        if outcomes is not None:
            row["rerank"]["outcomes"] = outcomes
    return row


def test_the_page_gets_one_row_per_rerank_level() -> None:
    shares = outcome_shares(ANSWERS)
    bench = {
        "retrieve": [
            _row("no rerank", 1, None),
            _row("rerank", 1, shares),
            _row("rerank", 16, shares),
        ]
    }
    section = rerank_shares_section(bench)
    assert section.startswith("### Rerank outcome shares per concurrency level\n")
    assert "| 1 | 8 | 0.250 | 0.250 | 0.250 | 0.250 | 6/8 | 4.2 | 2.5 |" in section
    assert "| 16 | 8 |" in section


def test_older_results_without_shares_leave_the_table_out() -> None:
    assert rerank_shares_section({"retrieve": [_row("rerank", 1, None)]}) == ""
