"""The release check's verdicts: each check's pass or fail with its reason,
from the sections the check collected (services.operator.release runs it,
services.operator.release_report writes the record)."""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.core.errors import InvalidArgument
from services.operator.golden import exact_mrr
from services.operator.release_report import (
    STATE_FIELDS,
    Check,
    DryRunSection,
    GenerationSection,
    GoldenSection,
    Thresholds,
    VerifySection,
)

MAX_LISTED = 50  # differing documents / findings kept in the record


def verify_section(report: ipb.VerifyReport) -> VerifySection:
    def as_dict(message: Message) -> dict[str, Any]:
        return MessageToDict(message, preserving_proto_field_name=True)

    return VerifySection(
        available=True,
        clean=report.clean,
        documents=report.documents,
        committed_generation=report.committed_generation,
        findings_total=report.findings_total,
        counts=[as_dict(c) for c in report.counts],
        findings=[as_dict(f) for f in report.findings[:MAX_LISTED]],
    )


def verify_check(report: ipb.VerifyReport) -> Check:
    if report.clean:
        return Check("verify", True, f"clean ({report.documents} documents)")
    first = report.findings[0] if report.findings else None
    example = f"; first: {first.kind} in {first.store}, {first.doc_id}" if first else ""
    return Check("verify", False, f"{report.findings_total} findings{example}")


def check_scope_was_ingested(audit: VerifySection, scope: str) -> None:
    """A scope the index holds no chunk of (by the audit's counts) was never
    ingested or is misspelt: a usage error with no record, so a typo in
    `--scope` cannot close the public entry."""
    if audit.available and scope not in {c.get("scope_id", "") for c in audit.counts}:
        raise InvalidArgument(
            f"--scope {scope!r} holds no documents in the index: check its spelling, "
            "or ingest the source first"
        )


def scopes_check(audit: VerifySection, scope: str, unchecked: list[str]) -> Check:
    """The verdict opens the whole index (the gate knows generations, not
    scopes), so another scope would be served unchecked: it fails the check
    unless the operator names it (`--unchecked-scope`)."""
    if not audit.available:
        return Check("scopes", False, "unknown (the audit did not run)")
    held = sorted({str(c.get("scope_id", "")) for c in audit.counts})
    others = [s for s in held if s != scope and s not in unchecked]
    if others:
        listed = ", ".join(repr(s) for s in others[:MAX_LISTED])
        return Check(
            "scopes",
            False,
            f"the index also holds {listed}, which this check did not cover and the "
            "verdict would open (check them, or name them with --unchecked-scope)",
        )
    named = [s for s in held if s in unchecked]
    return Check("scopes", True, f"{scope!r}" + (f", and unchecked {named}" if named else ""))


def dry_run_check(section: DryRunSection) -> Check:
    if section.in_sync:
        return Check("dry_run", True, f"the index holds the source ({section.documents} unchanged)")
    if not section.documents and not section.counts["rejected"]:
        return Check("dry_run", False, "the source holds no documents")
    diff = ", ".join(f"{n}={section.counts[n]}" for n in STATE_FIELDS[1:] if section.counts[n])
    return Check("dry_run", False, f"the index does not hold what the source says: {diff}")


def golden_check(golden: GoldenSection, thresholds: Thresholds) -> Check:
    s = golden.scores
    # The exact fractions: the rounded ones in the record made 20,000 of
    # 20,001 a pass rate of 1.0.
    ok = (
        s.queries > 0
        and s.passed / s.queries >= thresholds.min_pass_rate
        and exact_mrr(golden.outcomes) >= thresholds.min_mrr
    )
    detail = (
        f"{s.passed}/{s.queries} passed (needs pass rate >= {thresholds.min_pass_rate}), "
        f"hit@1 {s.hit_at_1}, MRR {s.mrr} (needs >= {thresholds.min_mrr})"
    )
    return Check("golden", ok, detail)


def generation_section(
    start: int, end: int, verified: int | None, served: int | None
) -> GenerationSection:
    seen = {start, end} | ({verified} if verified is not None else set())
    stable = len(seen) == 1 and (served is None or served == start)
    return GenerationSection(start, end, verified, served, stable)


def generation_check(gen: GenerationSection) -> Check:
    if gen.stable:
        return Check("generation", True, f"generation {gen.at_start} throughout")
    if gen.served is not None and {gen.at_start, gen.at_end} == {gen.served}:
        detail = f"the Retriever serves generation {gen.served}, the check saw {gen.at_start}"
        return Check("generation", False, detail)
    verified = f", {gen.verified} when verified" if gen.verified is not None else ""
    detail = (
        f"the index moved under the check: generation {gen.at_start} at start, "
        f"{gen.at_end} at end{verified}, {gen.served} served"
    )
    return Check("generation", False, detail)


def failure_lines(checks: list[Check], golden: GoldenSection) -> list[str]:
    """One line per failed check; the golden queries that made it fail follow it."""
    failures = [f"{c.name}: {c.detail}" for c in checks if not c.passed]
    if any(c.name == "golden" and not c.passed for c in checks):
        failures += [
            f"golden {o.label} ({o.query!r}): {'; '.join(o.problems)}"
            for o in golden.outcomes
            if not o.passed
        ]
    return failures
