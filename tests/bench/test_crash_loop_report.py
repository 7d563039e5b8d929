"""The crash loop's pieces that decide its verdict without a stack: unique
tokens, the whole/absent/half-visible rule, and the benchmark-page section."""

from __future__ import annotations

import random

import pytest

from bench.reports.crash_loop import crash_loop_section
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from tests.support.crash_audit import DocumentRows
from tests.support.crash_clients import TOKEN_LETTERS, document, token_for, token_of

pytestmark = pytest.mark.unit

UNCHANGED, ADDED = ipb.DOCUMENT_STATE_UNCHANGED, ipb.DOCUMENT_STATE_ADDED
IDS = frozenset({"c1", "c2"})
MACHINE = {
    "cpu": "cpu",
    "logical_cpus": 2,
    "memory_gib": 8,
    "python": "3.11",
    "torch": "2",
    "torch_threads": 2,
    "load_average_1m": 3.5,
}


def test_every_document_has_its_own_token_in_its_text() -> None:
    tokens = [token_for(n) for n in range(1, 20_000)]
    assert len(set(tokens)) == len(tokens)
    assert all(set(t[2:-1]) <= set(TOKEN_LETTERS) for t in tokens)
    doc = document(4242, random.Random(1))
    assert token_of(doc.doc_id) == token_for(4242)
    assert doc.text.count(token_for(4242)) == 2


@pytest.mark.parametrize(
    ("rows", "whole", "absent"),
    [
        (DocumentRows(IDS, IDS, IDS, UNCHANGED, 2), True, False),
        (DocumentRows(frozenset(), frozenset(), frozenset(), ADDED, 2), False, True),
        # one store lacks a chunk: half-visible
        (DocumentRows(IDS, IDS, frozenset({"c1"}), UNCHANGED, 2), False, False),
        # rows without a manifest entry: half-visible
        (DocumentRows(frozenset(), IDS, IDS, ADDED, 2), False, False),
        # fewer chunks than the document has: half-visible
        (DocumentRows(IDS, IDS, IDS, UNCHANGED, 3), False, False),
        # the stored version is not the one sent
        (DocumentRows(IDS, IDS, IDS, ipb.DOCUMENT_STATE_CHANGED, 2), False, False),
    ],
)
def test_a_document_is_whole_absent_or_half_visible(
    rows: DocumentRows, whole: bool, absent: bool
) -> None:
    assert (rows.whole, rows.absent) == (whole, absent)


def test_the_section_shows_each_modes_figures() -> None:
    figures = {
        "loop_s": 500.0,
        "kills": 31,
        "kills_during_startup": 10,
        "writes_cut_by_kills": 12,
        "acknowledged": 556,
        "lost": 0,
        "unacknowledged": 3206,
        "unacknowledged_visible": 4,
        "half_visible": 0,
        "verify_clean": True,
        "restart_to_ready_s": {"n": 21, "p50": 7.2, "max": 15.0},
    }
    run = {"command": "python -m bench.load.crash_loop", "date": "d", "git_revision": "r"}
    result = {
        "runs": {"postgres": {**run, "mode": "postgres", "machine": MACHINE, "figures": figures}}
    }
    section = crash_loop_section(result)
    assert (
        "| postgres | 500.0 | 31 | 10 | 12 | 556 | 0 | 3206 | 4 | 0 | clean | 7.2 / 15.0 |"
        in section
    )
    assert "| embedded |" not in section  # no row for a mode not run


def test_a_mode_that_could_not_run_says_why_and_has_no_row() -> None:
    run = {"command": "c", "date": "d", "git_revision": "r", "machine": MACHINE}
    result = {"runs": {"postgres": {**run, "mode": "postgres", "not_run": "pgvector SIGILL"}}}
    section = crash_loop_section(result)
    assert "PostgreSQL: not run. pgvector SIGILL." in section
    assert "| postgres |" not in section
