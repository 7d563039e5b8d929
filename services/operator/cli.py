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
from collections.abc import Iterable, Iterator
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from tqdm import tqdm

from rag_client import CallError, IndexerClient, RagClientError
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.core.errors import ConfigError
from services.core.models import ContentType, Document
from services.operator.cli_clients import indexer_client
from services.sources.loaders import LoadError, load_beir_jsonl, load_directory
from services.sources.locale_detection import normalize_tag

DEFAULT_LOCALE = "en"
SYNC_TIMEOUT_S = 600.0  # a Sync plans and removes a whole scope's leftovers

_CONTENT = {
    ContentType.MARKDOWN: pb.CONTENT_TYPE_MARKDOWN,
    ContentType.HTML: pb.CONTENT_TYPE_HTML,
    ContentType.TEXT: pb.CONTENT_TYPE_TEXT,
}
_COUNT_FIELDS = [f.name for f in pb.PlanCounts.DESCRIPTOR.fields]


def document_to_proto(doc: Document) -> pb.Document:
    return pb.Document(
        doc_id=doc.doc_id,
        url=doc.url,
        title=doc.title,
        locale=doc.locale,
        scope_id=doc.scope_id,
        text=doc.text,
        metadata=doc.metadata,
        content_type=_CONTENT[doc.content_type],
        updated_at=doc.updated_at,
    )


def iter_source(args: argparse.Namespace) -> Iterator[Document | LoadError]:
    path = Path(args.path)
    fmt = args.format
    if fmt == "auto":
        fmt = "dir" if path.is_dir() else "beir"
    if fmt == "dir":
        yield from load_directory(
            path,
            scope_id=args.scope,
            locale=args.locale,  # "": each page its own
            base_url=args.base_url,
            follow_symlinks=args.follow_symlinks,
        )
    else:
        yield from load_beir_jsonl(
            path,
            scope_id=args.scope,
            locale=args.locale or DEFAULT_LOCALE,
            title_as_heading=args.title_as_heading,
        )


def batches(items: Iterable[Document], size: int, max_chars: int) -> Iterator[list[Document]]:
    """Bounded batches (count and characters) so memory and message size stay small."""
    batch: list[Document] = []
    chars = 0
    for doc in items:
        if batch and (len(batch) >= size or chars + len(doc.text) > max_chars):
            yield batch
            batch, chars = [], 0
        batch.append(doc)
        chars += len(doc.text)
    if batch:
        yield batch


class Ingest:
    def __init__(self, client: IndexerClient, args: argparse.Namespace) -> None:
        self.client, self.args = client, args
        self.totals = dict.fromkeys(_COUNT_FIELDS, 0)
        self.rejected: list[str] = []
        self.kept: list[pb.DocumentKey] = []
        # (doc_id, state) of every document the run (or plan) changes.
        self.differing: list[tuple[str, str]] = []

    def run(self) -> int:
        self.collect()
        self._report()
        return 1 if self.rejected else 0

    def collect(self) -> None:
        """Send the whole source (and the Sync, with --sync); totals, rejections
        and differing documents accumulate on `self`."""
        docs = self._valid_documents(iter_source(self.args))
        bar = tqdm(desc="documents", unit="doc", disable=self.args.quiet)
        for batch in batches(docs, self.args.batch, self.args.batch_chars):
            self._send(batch, bar)
        bar.close()
        if self.args.sync:
            reply = self.client.sync(
                self.args.scope, self.kept, dry_run=self.args.dry_run, deadline=SYNC_TIMEOUT_S
            )
            self._add(reply)

    def _valid_documents(self, items: Iterable[Document | LoadError]) -> Iterator[Document]:
        for item in items:
            if isinstance(item, LoadError):
                self.rejected.append(f"{item.source}: {item.reason}")
                continue
            yield item

    def _send(self, batch: list[Document], bar: tqdm) -> None:
        documents = [document_to_proto(d) for d in batch]
        done_before = bar.n
        progress = self.client.upsert_stream(
            documents, dry_run=self.args.dry_run, deadline=self.args.timeout
        )
        for message in progress:
            bar.update(done_before + message.documents_done - bar.n)
            if message.HasField("result"):
                self._add(message.result)
        self.kept.extend(pb.DocumentKey(doc_id=d.doc_id, locale=d.locale) for d in batch)

    def _add(self, reply: pb.UpsertResponse) -> None:
        for name in _COUNT_FIELDS:
            self.totals[name] += getattr(reply.counts, name)
        for outcome in reply.outcomes:
            if outcome.state == pb.DOCUMENT_STATE_REJECTED:
                self.rejected.append(f"{outcome.doc_id}: {outcome.error}")
            elif outcome.state != pb.DOCUMENT_STATE_UNCHANGED:
                state = pb.DocumentState.Name(outcome.state).removeprefix("DOCUMENT_STATE_")
                self.differing.append((outcome.doc_id, state.lower()))

    def _report(self) -> None:
        prefix = "plan (dry run)" if self.args.dry_run else "done"
        print(f"{prefix}: " + ", ".join(f"{k}={v}" for k, v in self.totals.items()))
        for line in self.rejected[:20]:
            print(f"rejected {line}", file=sys.stderr)
        if len(self.rejected) > 20:
            print(f"... and {len(self.rejected) - 20} more rejected", file=sys.stderr)


def cmd_delete(client: IndexerClient, args: argparse.Namespace) -> int:
    reply = client.delete(
        args.doc_ids, locale=args.locale, dry_run=args.dry_run, deadline=args.timeout
    )
    print(json.dumps(MessageToDict(reply, preserving_proto_field_name=True), indent=2))
    return 0


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
    p.add_argument("--addr", default="localhost:50051", help="Indexer host:port")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per RPC")
    sub = p.add_subparsers(dest="command", required=True)
    ingest = sub.add_parser(
        "ingest",
        help="index a directory (md/html/txt) or a BEIR JSONL file",
        description="Index a directory (md/html/txt; hidden files and symbolic links are "
        "skipped) or a BEIR JSONL file. Each page of a directory gets its own locale unless "
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
    # Imported here: the release check reuses this module's Ingest.
    from services.operator.release import add_release_check_parser

    add_release_check_parser(sub)
    return p


def add_source_options(p: argparse.ArgumentParser) -> None:
    """What `ingest` and `release-check` read: the same source, the same way."""
    p.add_argument("path")
    p.add_argument("--scope", required=True, help="scope_id of every document")
    p.add_argument(
        "--locale",
        type=_locale_tag,
        default="",
        help="locale of every document, over anything a page says (e.g. en, zh-CN). "
        "Without it a folder's page takes its own: front matter lang/locale, <html lang>, "
        "a locale folder in its path (en/, zh-CN/), else the script of its text, else "
        f"{DEFAULT_LOCALE}; a BEIR file is {DEFAULT_LOCALE}",
    )
    p.add_argument("--base-url", default="", help="URL prefix for directory documents")
    p.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="follow symbolic links in the folder (skipped by default), "
        "only to files and folders inside it",
    )
    p.add_argument("--format", choices=["auto", "dir", "beir"], default="auto")
    p.add_argument(
        "--title-as-heading",
        action="store_true",
        help="BEIR: also put the title into the body as a Markdown H1, so it is embedded",
    )
    p.add_argument("--batch", type=int, default=64, help="documents per request")
    p.add_argument("--batch-chars", type=int, default=4_000_000)


def _locale_tag(value: str) -> str:
    """`--locale` in the one spelling the index uses (`zh_cn` → `zh-CN`); "": none."""
    if not value:
        return ""
    tag = normalize_tag(value)
    if tag is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a language tag like 'en' or 'zh-CN'")
    return tag


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "release-check":
        from services.operator.release import run_release_check

        return run_release_check(args)
    try:
        client = indexer_client(args.addr, args.timeout)
    except RagClientError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
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
