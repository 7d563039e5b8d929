"""The release check's verdicts on collected sections (services/operator/
release_verdicts.py) and the record the Indexer is sent (release.py): what
the probe of the release loop found open."""

from __future__ import annotations

import json

import pytest

from services.indexer.release_records import MAX_RECORD_CHARS
from services.operator import release
from services.operator.golden import QueryOutcome, score
from services.operator.release_report import (
    Check,
    DryRunSection,
    GateConfig,
    GenerationSection,
    GoldenSection,
    ReleaseRecord,
    StatsSection,
    Thresholds,
    VerifySection,
)
from services.operator.release_verdicts import golden_check, scopes_check

pytestmark = pytest.mark.unit


def outcomes(passing: int, failing: int) -> list[QueryOutcome]:
    text = "restore a backup " + "x" * 400
    good = [QueryOutcome(i, f"q{i}", text, True, 1) for i in range(passing)]
    bad = [QueryOutcome(passing, "lost", "quarterly tax filing", False, None, problems=["none"])]
    return good + bad * failing


def golden(results: list[QueryOutcome]) -> GoldenSection:
    return GoldenSection("golden.jsonl", "0" * 64, score(results), results)


def test_one_failure_in_twenty_thousand_is_a_failure_not_a_rounded_pass() -> None:
    section = golden(outcomes(20_000, 1))
    assert section.scores.pass_rate == 1.0  # as the record shows it, rounded
    assert not golden_check(section, Thresholds(1.0, 0.0, 5)).passed
    assert not golden_check(section, Thresholds(0.0, 1.0, 5)).passed  # MRR 0.99995
    assert golden_check(golden(outcomes(5, 0)), Thresholds(1.0, 1.0, 5)).passed


def audit(*scopes: str) -> VerifySection:
    return VerifySection(available=True, clean=True, counts=[{"scope_id": s} for s in scopes])


def test_a_scope_the_check_did_not_cover_fails_it_unless_named() -> None:
    # The verdict opens the whole index: a check of one scope opened another.
    assert scopes_check(audit("docs"), "docs", []).passed
    other = scopes_check(audit("docs", "other"), "docs", [])
    assert not other.passed and "'other', which this check did not cover" in other.detail
    assert scopes_check(audit("docs", "other"), "docs", ["other"]).passed
    assert not scopes_check(VerifySection(available=False), "docs", []).passed


def record(results: list[QueryOutcome]) -> ReleaseRecord:
    stats = StatsSection(0, 0, {}, 0, 0, 0, {}, 7, 0, "m", 384, {}, "v", "l")
    return ReleaseRecord(
        checked_at="2026-12-06T00:00:00Z",
        passed=False,
        failures=["golden: 8000/8001 passed"],
        checks=[Check("golden", False, "8000/8001 passed")],
        source={"path": "docs"},
        generation=GenerationSection(7, 7, 7, 7, True),
        dry_run=DryRunSection(1, {}, {}),
        verify=audit("docs"),
        golden=golden(results),
        stats=stats,
        gate_config=GateConfig("golden.jsonl", "0" * 64, Thresholds(), "i", "r", {}),
    )


def test_a_record_past_the_indexers_limit_is_sent_without_its_passing_queries() -> None:
    # Probe: 8,001 golden lines made a failing record too long to store, and
    # the earlier pass kept the public entry open.
    big = record(outcomes(9_000, 1))
    text = big.to_json()
    assert len(text) > MAX_RECORD_CHARS
    sent = release.record_for_the_index(big, text)
    assert len(sent) <= MAX_RECORD_CHARS
    compact = json.loads(sent)
    assert compact["passed"] is False and compact["generation"]["at_start"] == 7
    assert [o["label"] for o in compact["golden"]["outcomes"]] == ["lost"]
    assert compact["golden"]["outcomes_left_out"] == 9_000
    small = record(outcomes(3, 1))
    assert release.record_for_the_index(small, small.to_json()) == small.to_json()
