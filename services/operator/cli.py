"""Operator CLI for the Indexer (talks to it over gRPC).

python -m services.operator.cli ingest docs/ --scope handbook [--dry-run] [--sync]
python -m services.operator.cli ingest site/ --scope site   # en/, zh-CN/: each page its own locale
python -m services.operator.cli ingest corpus.jsonl --scope scifact --format beir
python -m services.operator.cli delete DOC_ID [DOC_ID ...] [--locale en]
python -m services.operator.cli stats
python -m services.operator.cli release-check docs/ --scope handbook --golden golden.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys

from google.protobuf.json_format import MessageToDict
from tqdm import tqdm

from rag_client import CallError, IndexerClient, RagClientError
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.core.errors import ConfigError, RagError
from services.operator.cli_clients import address_help, indexer_client
from services.operator.ingest import Ingest
from services.operator.release import add_release_check_parser, run_release_check
from services.operator.source_options import add_source_options
from services.runtime.closed_pipe import quiet_on_closed_pipe
from services.runtime.misspelt_settings import misspelt_settings


def cmd_delete(client: IndexerClient, args: argparse.Namespace) -> int:
    reply = client.delete(
        args.doc_ids, locale=args.locale, dry_run=args.dry_run, deadline=args.timeout
    )
    print(json.dumps(MessageToDict(reply, preserving_proto_field_name=True), indent=2))
    # As `ingest` does for documents it could not index: an id that is not
    # indexed (a typo, another scope's) is a failure a script can see.
    refused = [o for o in reply.outcomes if o.error_code]
    for outcome in refused:
        print(f"{outcome.doc_id}: {outcome.error_code}: {outcome.error}", file=sys.stderr)
    return 1 if refused else 0


def cmd_stats(client: IndexerClient, args: argparse.Namespace) -> int:
    reply = client.stats(deadline=args.timeout)
    print(
        json.dumps(
            MessageToDict(
                reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            ),
            indent=2,
        )
    )
    return 0


def cmd_verify(client: IndexerClient, args: argparse.Namespace) -> int:
    """Audit (or repair) the index; one progress bar per phase; exit 1 unless clean."""
    bar: tqdm | None = None
    phase = ""  # tracked here: a disabled tqdm has no `desc`
    report: pb.VerifyReport | None = None
    for message in client.verify(repair=args.repair, deadline=args.timeout):
        if message.HasField("report"):
            report = message.report
            break
        if bar is None or phase != message.phase:
            if bar is not None:
                bar.close()
            phase = message.phase
            bar = tqdm(desc=phase, unit="row", total=message.total or None, disable=args.quiet)
        bar.update(message.done - bar.n)
    if bar is not None:
        bar.close()
    assert report is not None, "the Indexer ended Verify without a report"
    print_verify_report(report, as_json=args.json)
    return 0 if report.clean else 1


def print_verify_report(report: pb.VerifyReport, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(MessageToDict(report, preserving_proto_field_name=True), indent=2))
        return
    verdict = "clean" if report.clean else "NOT clean"
    print(
        f"index {verdict}: generation {report.committed_generation}, {report.documents} documents"
    )
    print(f"{'scope':<20} {'locale':<8} {'manifest':>9} {'vectors':>9} {'lexical':>9}")
    for c in report.counts:
        print(
            f"{c.scope_id:<20} {c.locale:<8} "
            f"{c.manifest_chunks:>9} {c.vectors:>9} {c.lexical_rows:>9}"
        )
    for f in report.findings:
        detail = f" {f.field}: expected {f.expected!r}, found {f.actual!r}" if f.field else ""
        repair = f" [{f.repair}]" if f.repair else ""
        print(f"{f.kind:<11} {f.store:<8} {f.chunk_id} ({f.doc_id}, {f.locale}){detail}{repair}")
    if report.findings_total > len(report.findings):
        print(f"... {report.findings_total - len(report.findings)} more findings")
    if report.repair:
        print(f"repaired {report.repaired}, unrepairable {report.unrepairable}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rag-indexer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--addr", default=None, help=address_help("indexer"))
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per RPC")
    sub = p.add_subparsers(dest="command", required=True)
    ingest = sub.add_parser(
        "ingest",
        help="index a directory (md/mdx/html/txt/rst/adoc, manual pages, Info manuals, README "
        "and its kin; also .gz) or a BEIR JSONL file",
        description="Index a directory (md/mdx/html/txt/rst/adoc pages, manual pages, GNU Info "
        "manuals and plain-text files named by convention such as README, NEWS or "
        "changelog.Debian; each also gzip-compressed as .gz; hidden files and symbolic links "
        "are skipped) or a BEIR JSONL file. "
        "Each page of a directory gets its own locale unless "
        "--locale is given, and pages that translate each other share "
        "metadata translation_key and list each other (locale, url, doc_id) in metadata "
        "translations, which search hits carry. Unreadable files are reported and the rest "
        "is indexed.",
    )
    add_source_options(ingest)
    ingest.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="also remove documents of the scope that are not in PATH",
    )
    ingest.add_argument(
        "--allow-empty-sync",
        action="store_true",
        help="with --sync, let a source with no page to index empty the scope (refused "
        "otherwise: an empty mount or a wrong folder would remove every page)",
    )
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    delete = sub.add_parser("delete", help="remove documents by id")
    delete.add_argument("doc_ids", nargs="+")
    delete.add_argument("--locale", default="")
    delete.add_argument("--dry-run", action="store_true")
    sub.add_parser("stats", help="documents, chunks, vectors, rows, chunking, last run")
    verify = sub.add_parser(
        "verify",
        help="audit manifest, vector and lexical store against each other (exit 1 unless clean)",
    )
    verify.add_argument(
        "--repair",
        action="store_true",
        help="delete orphans, rewrite missing or drifted chunks from the other store",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("--quiet", action="store_true", help="no progress bar")
    add_release_check_parser(sub)
    return p


INTERRUPTED = (
    "interrupted: each request of --batch documents is one all-or-nothing run, so every "
    "document is either in its new version or its old one; run the same command again "
    "to finish (what is already in is unchanged and costs nothing)"
)
INTERRUPTED_OTHER = (
    "interrupted: a write the Indexer started is one all-or-nothing run, and a release "
    "record is written whole or not at all; run the same command again"
)


def main(argv: list[str] | None = None) -> int:
    return quiet_on_closed_pipe(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    command_line = parser()
    args = command_line.parse_args(argv)
    if getattr(args, "allow_empty_sync", False) and not args.sync:
        # Alone it would do nothing: the operator meant a sync, or no override.
        command_line.error("argument --allow-empty-sync: only with --sync")
    for typo in misspelt_settings():
        print(f"warning: {typo.message()}", file=sys.stderr)
    try:
        return _command(args)
    except RagError as exc:  # the source named on the command line, before any run
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"\n{INTERRUPTED if args.command == 'ingest' else INTERRUPTED_OTHER}", file=sys.stderr
        )
        return 130  # as a shell reports SIGINT


def _command(args: argparse.Namespace) -> int:
    if args.command == "release-check":
        return run_release_check(args)
    try:
        client = indexer_client(args.addr, args.timeout)
    except RagClientError as exc:
        # The client's field is `target`; the operator typed --addr.
        message = str(exc)
        if args.addr is not None and message.startswith("target: "):
            message = "--addr: " + message.removeprefix("target: ")
        print(f"configuration error: {message}", file=sys.stderr)
        return 2
    try:
        if args.command == "ingest":
            return Ingest(client, args).run()
        commands = {"delete": cmd_delete, "stats": cmd_stats, "verify": cmd_verify}
        return commands[args.command](client, args)
    except CallError as exc:
        print(f"indexer error: {exc.code.name}: {exc.details}", file=sys.stderr)
        return 2
    except (RagClientError, ConfigError) as exc:  # e.g. the token file went away
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
