"""Operator CLI for the Indexer (talks to it over gRPC).

python -m services.indexer.cli ingest docs/ --scope handbook [--dry-run] [--sync]
python -m services.indexer.cli ingest corpus.jsonl --scope scifact --format beir
python -m services.indexer.cli delete DOC_ID [DOC_ID ...] [--locale en]
python -m services.indexer.cli stats
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import grpc
from google.protobuf.json_format import MessageToDict
from tqdm import tqdm

from services.common.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.common.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.common.models import ContentType, Document
from services.common.server import channel_options
from services.indexer.loaders import LoadError, load_beir_jsonl, load_directory

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
            path, scope_id=args.scope, locale=args.locale, base_url=args.base_url
        )
    else:
        yield from load_beir_jsonl(
            path,
            scope_id=args.scope,
            locale=args.locale,
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
    def __init__(self, stub: indexer_pb2_grpc.IndexerStub, args: argparse.Namespace) -> None:
        self.stub, self.args = stub, args
        self.totals = dict.fromkeys(_COUNT_FIELDS, 0)
        self.rejected: list[str] = []
        self.kept: list[pb.DocumentKey] = []

    def run(self) -> int:
        docs = self._valid_documents(iter_source(self.args))
        bar = tqdm(desc="documents", unit="doc", disable=self.args.quiet)
        for batch in batches(docs, self.args.batch, self.args.batch_chars):
            self._send(batch, bar)
        bar.close()
        if self.args.sync:
            reply = self.stub.Sync(
                pb.SyncRequest(scope_id=self.args.scope, keep=self.kept, dry_run=self.args.dry_run),
                timeout=600,
            )
            self._add(reply)
        self._report()
        return 1 if self.rejected else 0

    def _valid_documents(self, items: Iterable[Document | LoadError]) -> Iterator[Document]:
        for item in items:
            if isinstance(item, LoadError):
                self.rejected.append(f"{item.source}: {item.reason}")
                continue
            yield item

    def _send(self, batch: list[Document], bar: tqdm) -> None:
        request = pb.UpsertRequest(
            documents=[document_to_proto(d) for d in batch], dry_run=self.args.dry_run
        )
        done_before = bar.n
        for message in self.stub.UpsertStream(request, timeout=self.args.timeout):
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

    def _report(self) -> None:
        prefix = "plan (dry run)" if self.args.dry_run else "done"
        print(f"{prefix}: " + ", ".join(f"{k}={v}" for k, v in self.totals.items()))
        for line in self.rejected[:20]:
            print(f"rejected {line}", file=sys.stderr)
        if len(self.rejected) > 20:
            print(f"... and {len(self.rejected) - 20} more rejected", file=sys.stderr)


def cmd_delete(stub: indexer_pb2_grpc.IndexerStub, args: argparse.Namespace) -> int:
    reply = stub.Delete(
        pb.DeleteRequest(doc_ids=args.doc_ids, locale=args.locale, dry_run=args.dry_run),
        timeout=args.timeout,
    )
    print(json.dumps(MessageToDict(reply, preserving_proto_field_name=True), indent=2))
    return 0


def cmd_stats(stub: indexer_pb2_grpc.IndexerStub, args: argparse.Namespace) -> int:
    reply = stub.Stats(pb.StatsRequest(), timeout=args.timeout)
    print(
        json.dumps(
            MessageToDict(
                reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            ),
            indent=2,
        )
    )
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rag-indexer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--addr", default="localhost:50051", help="Indexer host:port")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per RPC")
    sub = p.add_subparsers(dest="command", required=True)
    ingest = sub.add_parser("ingest", help="index a directory (md/html/txt) or a BEIR JSONL file")
    ingest.add_argument("path")
    ingest.add_argument("--scope", required=True, help="scope_id of every document")
    ingest.add_argument("--locale", default="en")
    ingest.add_argument("--base-url", default="", help="URL prefix for directory documents")
    ingest.add_argument("--format", choices=["auto", "dir", "beir"], default="auto")
    ingest.add_argument(
        "--title-as-heading",
        action="store_true",
        help="BEIR: also put the title into the body as a Markdown H1, so it is embedded",
    )
    ingest.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="also remove documents of the scope that are not in PATH",
    )
    ingest.add_argument("--batch", type=int, default=64, help="documents per request")
    ingest.add_argument("--batch-chars", type=int, default=4_000_000)
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    delete = sub.add_parser("delete", help="remove documents by id")
    delete.add_argument("doc_ids", nargs="+")
    delete.add_argument("--locale", default="")
    delete.add_argument("--dry-run", action="store_true")
    sub.add_parser("stats", help="documents, chunks, vectors, rows, chunking, last run")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    channel = grpc.insecure_channel(args.addr, options=channel_options(64 * 1024 * 1024))
    stub = indexer_pb2_grpc.IndexerStub(channel)
    try:
        if args.command == "ingest":
            return Ingest(stub, args).run()
        return {"delete": cmd_delete, "stats": cmd_stats}[args.command](stub, args)
    except grpc.RpcError as exc:
        print(f"indexer error: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 2
    finally:
        channel.close()


if __name__ == "__main__":
    sys.exit(main())
