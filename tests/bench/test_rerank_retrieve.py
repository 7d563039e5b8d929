"""The figures `python -m bench.load.rerank_retrieve` records for one load
run, from hand-made answers (no stack: the command itself needs the
third-party index, which takes minutes to build)."""

from __future__ import annotations

import pytest

from bench.common.retrieve_loop import Answer, LoadResult
from bench.load.rerank_retrieve import summary
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

pytestmark = pytest.mark.unit


def reply(candidates: int, reranked: int, *, fallback: bool = False) -> pb.RetrieveResponse:
    outcome = pb.RerankOutcome(
        used=reranked > 0, fallback=fallback, candidates=candidates, reranked=reranked
    )
    return pb.RetrieveResponse(rerank=outcome)


def test_a_run_counts_late_answers_errors_and_what_was_scored() -> None:
    load = LoadResult(
        concurrency=16,
        wall_s=2.0,
        answers=[
            Answer("q1", 200.0, reply(4, 4)),
            Answer("q2", 900.0, reply(4, 2, fallback=True)),
            Answer("q3", 1004.0, reply(4, 0, fallback=True)),  # answered after the deadline
            Answer("q4", 1000.0, error="DEADLINE_EXCEEDED"),
        ],
    )
    figures = summary(load, candidates=4, deadline_ms=1000.0)
    assert figures["late"] == 1 and figures["errors"] == {"DEADLINE_EXCEEDED": 1}
    assert figures["latency"]["n"] == 3
    assert (figures["sent_mean"], figures["scored_mean"]) == (4.0, 2.0)
    assert figures["outcomes"]["answers"] == 3
    assert figures["throughput_rps"] == 1.5
