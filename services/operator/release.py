"""`release-check`: one command that decides whether an index may be opened
to the public, and leaves a record of why.

    python -m services.operator.cli release-check docs/ --scope handbook \
        --golden golden.jsonl [--out release-checks] [--retriever-addr HOST:PORT]

It runs, in order, against the live services:
1. the Indexer's dry run of the source (`ingest --sync --dry-run`): the plan is
   made against the index's own manifest, so it is the authoritative diff;
   anything but `unchanged` means the index does not hold what the source says;
2. `Verify` (no repair): manifest, vectors and lexical rows agree;
3. every golden query through `Retrieve` (services.operator.golden);
4. `Stats` before and after: if the committed generation moved, the verdict
   would describe an index that is no longer the one served, so it fails.
Then it writes the record (services.operator.release_report), stores it with
the index (`RecordRelease`), so the Retriever and the Gateway can tell whether
the generation they serve passed, and prints the summary.

Exit status: 0 passed, 1 failed, 2 usage or connection error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import grpc
from google.protobuf.json_format import MessageToDict

from rag_client import CallError, IndexerClient, RagClientError, RetrieverClient
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.core.errors import InvalidArgument, RagError
from services.indexer.release_records import MAX_RECORD_CHARS
from services.operator import golden as g
from services.operator.cli_clients import (
    address_help,
    indexer_client,
    resolved_address,
    retriever_client,
)
from services.operator.ingest import Ingest
from services.operator.release_report import (
    STATE_FIELDS,
    Check,
    DryRunSection,
    GateConfig,
    GoldenSection,
    ReleaseRecord,
    StatsSection,
    Thresholds,
    VerifySection,
    write_record,
)
from services.operator.release_verdicts import (
    MAX_LISTED,
    check_scope_was_ingested,
    dry_run_check,
    failure_lines,
    generation_check,
    generation_section,
    golden_check,
    scopes_check,
    verify_check,
    verify_section,
)
from services.operator.source_options import add_source_options

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_PLAN_FIELDS = [f.name for f in ipb.PlanCounts.DESCRIPTOR.fields if f.name not in STATE_FIELDS]
_CREDENTIALS = re.compile(r"(://)[^/@\s]+@")


def add_release_check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "release-check",
        help="dry run + verify + golden queries + stats → a release record (exit 0/1/2)",
    )
    add_source_options(p)
    p.add_argument("--golden", required=True, help="golden queries (JSONL)")
    p.add_argument("--out", default="release-checks", help="directory for the records")
    p.add_argument("--retriever-addr", default=None, help=address_help("retriever"))
    p.add_argument(
        "--min-pass-rate",
        type=_fraction,
        default=1.0,
        help="fraction of golden queries that must pass (default: all)",
    )
    p.add_argument("--min-mrr", type=_fraction, default=0.0, help="lowest acceptable MRR")
    p.add_argument(
        "--unchecked-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="a scope of the index this check does not cover, opened with it anyway "
        "(repeatable); any other scope besides --scope fails the check, since the verdict "
        "opens the whole index",
    )


def _out_inside_source(out: Path, source: Path) -> str | None:
    """Why `--out` cannot be where it is, or None: records (Markdown) written
    inside the source folder would be indexed by the next ingest. A hidden
    folder there is fine: the walk skips it."""
    if not source.is_dir():
        return None
    real_out, real_source = out.resolve(), source.resolve()
    if not real_out.is_relative_to(real_source):
        return None
    if any(part.startswith(".") for part in real_out.relative_to(real_source).parts):
        return None
    return (
        f"--out: {out} is inside the source folder {source}, so its records would be "
        "indexed by the next ingest; give a folder outside it (or a hidden one, like "
        f"{source / '.release-checks'})"
    )


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def run_release_check(args: argparse.Namespace) -> int:
    """The command. Usage and connection problems exit 2; a check that could
    not run leaves no record (one that ran but could not be stored with the
    index keeps its files, and says so)."""
    try:
        golden_file = g.load_golden(Path(args.golden))
    except g.GoldenFileError as exc:
        print(f"golden file error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out)
    if out.exists() and not out.is_dir():  # found before the check runs, not after
        print(f"--out: {out} is not a directory (the records are files inside it)", file=sys.stderr)
        return EXIT_USAGE
    if (problem := _out_inside_source(out, Path(args.path))) is not None:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    try:
        indexer = indexer_client(args.addr, args.timeout)
        retriever = retriever_client(args.retriever_addr, args.timeout)
    except (RagError, RagClientError) as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with indexer, retriever:
        check = ReleaseCheck(indexer, retriever, args, golden_file)
        try:
            return check.run_and_record()
        except CallError as exc:
            print(f"release check error: {exc.code.name}: {exc.details}", file=sys.stderr)
        except (RagError, RagClientError, OSError) as exc:
            print(f"release check error: {exc}", file=sys.stderr)
    return EXIT_USAGE


def record_for_the_index(record: ReleaseRecord, json_text: str) -> str:
    """The record as written to disk, or, past what the Indexer stores, the same
    without the golden queries that passed: a verdict that cannot be stored
    would leave an earlier pass opening the public entry."""
    if len(json_text) <= MAX_RECORD_CHARS:
        return json_text
    outcomes = record.golden.outcomes
    failed = [o for o in outcomes if not o.passed][:MAX_LISTED]
    golden = replace(record.golden, outcomes=failed)
    compact = json.loads(replace(record, golden=golden).to_json())
    compact["golden"]["outcomes_left_out"] = len(outcomes) - len(failed)
    compact["golden"]["note"] = (
        f"the full record ({len(json_text)} characters) is in the check's files; the "
        f"Indexer keeps at most {MAX_RECORD_CHARS}"
    )
    return json.dumps(compact, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class _VerifyOutcome:
    section: VerifySection
    check: Check


class ReleaseCheck:
    """One check of the live index; `run` only reads (the dry run writes
    nothing), `run_and_record` then writes the record and stores the verdict."""

    def __init__(
        self,
        indexer: IndexerClient,
        retriever: RetrieverClient,
        args: argparse.Namespace,
        golden_file: g.GoldenFile,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.indexer, self.retriever, self.args = indexer, retriever, args
        self.golden_file = golden_file
        self.environ = environ
        self.thresholds = Thresholds(args.min_pass_rate, args.min_mrr, g.DEFAULT_TOP_K)
        self.timeout: float = args.timeout

    def run_and_record(self) -> int:
        record = self.run()
        stamp = record.checked_at.replace("-", "").replace(":", "")
        written = write_record(record, Path(self.args.out), stamp)
        print(written.summary)
        print(f"record: {written.json_path}")
        request = ipb.RecordReleaseRequest(
            record_json=record_for_the_index(record, written.json_text),
            passed=record.passed,
            generation=record.generation.at_start,
        )
        try:
            reply = self.indexer.record_release(request, deadline=self.timeout)
        except CallError as exc:
            print(
                f"the record could not be stored with the index, so the Gateway cannot see it: "
                f"{exc.code.name}: {exc.details}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        print(
            f"stored with the index for generation {record.generation.at_start} "
            f"(committed now: {reply.committed_generation})"
        )
        return EXIT_PASSED if record.passed else EXIT_FAILED

    def run(self) -> ReleaseRecord:
        checked_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        before = self._stats()
        dry_run = self._dry_run()
        verify = self._verify()
        check_scope_was_ingested(verify.section, self.args.scope)
        outcomes = [self._ask(q) for q in self.golden_file.queries]
        served = self._served_generation()
        after = self._stats()
        generation = generation_section(
            before.committed_generation,
            after.committed_generation,
            verify.section.committed_generation if verify.section.available else None,
            served,
        )
        golden = GoldenSection(
            str(self.golden_file.path), self.golden_file.sha256, g.score(outcomes), outcomes
        )
        checks = [
            dry_run_check(dry_run),
            verify.check,
            scopes_check(verify.section, self.args.scope, self.args.unchecked_scope),
            golden_check(golden, self.thresholds),
            generation_check(generation),
        ]
        return ReleaseRecord(
            checked_at=checked_at,
            passed=all(c.passed for c in checks),
            failures=failure_lines(checks, golden),
            checks=checks,
            source=self._source(),
            generation=generation,
            dry_run=dry_run,
            verify=verify.section,
            golden=golden,
            stats=after,
            gate_config=self._gate_config(),
        )

    def _dry_run(self) -> DryRunSection:
        """Exactly `ingest --sync --dry-run`: the Indexer plans, nothing is written."""
        ingest_args = argparse.Namespace(
            **{**vars(self.args), "dry_run": True, "sync": True, "quiet": True}
        )
        ingest = Ingest(self.indexer, ingest_args)
        ingest.collect()
        counts = {name: ingest.totals[name] for name in STATE_FIELDS}
        # Unreadable files count too; files left out by rule (links, FIFOs) do not.
        counts["rejected"] = len(ingest.rejected)
        return DryRunSection(
            documents=len(ingest.kept),
            counts=counts,
            plan={name: ingest.totals[name] for name in _PLAN_FIELDS},
            differing=[{"doc_id": d, "state": s} for d, s in ingest.differing[:MAX_LISTED]],
            rejected=ingest.rejected[:MAX_LISTED],
            skipped=ingest.skipped[:MAX_LISTED],
            # A Sync refused (another sync of the scope came between) planned nothing.
            in_sync=bool(ingest.kept)
            and not ingest.sync_refused
            and all(counts[n] == 0 for n in STATE_FIELDS[1:]),
            sync_skipped=ingest.sync_skipped,
        )

    def _verify(self) -> _VerifyOutcome:
        """An audit that cannot run is a failed check, never a skipped one."""
        report: ipb.VerifyReport | None = None
        try:
            for message in self.indexer.verify(repair=False, deadline=self.timeout):
                if message.HasField("report"):
                    report = message.report
        except CallError as exc:
            if exc.code == grpc.StatusCode.UNAVAILABLE:
                raise
            why = f"{exc.code.name}: {exc.details}"
            return _VerifyOutcome(
                VerifySection(available=False, error=why),
                Check("verify", False, f"unavailable ({why})"),
            )
        if report is None:
            section = VerifySection(available=False, error="the stream ended without a report")
            return _VerifyOutcome(
                section, Check("verify", False, "unavailable (the stream ended without a report)")
            )
        return _VerifyOutcome(verify_section(report), verify_check(report))

    def _ask(self, query: g.GoldenQuery) -> g.QueryOutcome:
        request = g.retrieve_request(query, self.args.scope)
        try:
            response = self.retriever.retrieve(request, deadline=self.timeout)
        except CallError as exc:
            if exc.code == grpc.StatusCode.UNAVAILABLE:
                raise
            if exc.code == grpc.StatusCode.INVALID_ARGUMENT:
                # The golden line asks what the Retriever refuses (a top_k past
                # its limit): the file's mistake, a usage error with no record.
                raise InvalidArgument(
                    f"golden {query.label}: the Retriever refuses it: {exc.details}"
                ) from None
            return g.failed_call(query, f"{exc.code.name}: {exc.details}")
        return g.judge(query, response)

    def _served_generation(self) -> int | None:
        try:
            status = self.retriever.index_status(deadline=self.timeout)
        except CallError as exc:
            if exc.code == grpc.StatusCode.UNAVAILABLE:
                raise
            return None
        return int(status.committed_generation)

    def _stats(self) -> StatsSection:
        s = self.indexer.stats(deadline=self.timeout)
        return StatsSection(
            documents=s.documents,
            chunks=s.chunks,
            chunks_by_locale=dict(sorted(s.chunks_by_locale.items())),
            vectors=s.vectors,
            lexical_rows=s.lexical_rows,
            manifest_rows=s.manifest_rows,
            last_run={name: getattr(s.last_run, name) for name in STATE_FIELDS},
            committed_generation=s.committed_generation,
            pending_documents=s.pending_documents,
            embedding_model=s.embedding_model,
            embedding_dim=s.embedding_dim,
            chunking=MessageToDict(s.chunking, preserving_proto_field_name=True),
            vector_backend=s.vector_backend,
            lexical_backend=s.lexical_backend,
        )

    def _source(self) -> dict[str, str]:
        a = self.args
        return {
            "path": str(a.path),
            "format": a.format,
            "scope": a.scope,
            "locale": a.locale,
            "base_url": a.base_url,
        }

    def _gate_config(self) -> GateConfig:
        return GateConfig(
            golden_file=str(self.golden_file.path.resolve()),
            golden_sha256=self.golden_file.sha256,
            thresholds=self.thresholds,
            indexer_addr=resolved_address("indexer", self.args.addr, self.environ),
            retriever_addr=resolved_address("retriever", self.args.retriever_addr, self.environ),
            gateway_env=gateway_environment(self.environ),
        )


def gateway_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The Gateway's settings as this shell sets them, with URL credentials masked."""
    return {
        key: _CREDENTIALS.sub(r"\1***@", value)
        for key, value in sorted(environ.items())
        if key.startswith("RAG_GATEWAY_")
    }
