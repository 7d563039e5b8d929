"""Ingest from the command line: read a source (a folder or a BEIR file),
send it to the Indexer in batches with progress, add up what the runs did.

Shared by `ingest` and `release-check` (services.operator.release), which
read the same source the same way; the command line itself is
services.operator.cli.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import regex
from tqdm import tqdm

from rag_client import Aborted, IndexerClient
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.core.errors import EmptyDocument, InvalidArgument, NotFound
from services.core.field_rules import canonical_language_tag
from services.core.models import ContentType, Document
from services.operator.source_options import DEFAULT_LOCALE, max_document_chars_from_env
from services.sources.loaders import LoadError, load_beir_jsonl, load_directory
from services.sources.text_files import is_supported_name

OWNED_ELSEWHERE_CODE = "ALREADY_EXISTS"  # services/indexer/planning.py
OWNED_ELSEWHERE_HINT = (
    "a page's id is its path in the folder, and ids are unique across scopes: "
    "--id-prefix NAME/ gives this source's pages ids of their own"
)
SYNC_TIMEOUT_S = 600.0  # a Sync plans and removes a whole scope's leftovers

_CONTENT = {
    ContentType.MARKDOWN: pb.CONTENT_TYPE_MARKDOWN,
    ContentType.HTML: pb.CONTENT_TYPE_HTML,
    ContentType.TEXT: pb.CONTENT_TYPE_TEXT,
}
_COUNT_FIELDS = [f.name for f in pb.PlanCounts.DESCRIPTOR.fields]
_SURROGATE = re.compile("[\ud800-\udfff]")
# What `printable` escapes: CONTROL_CHARACTERS and the format characters (Cf).
_UNPRINTABLE = regex.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\p{Cf}]")


def printable(text: str) -> str:
    """`text` with control and format characters as escapes: a file named
    `a\x1b[2Jb.md` must not clear the operator's terminal, a newline forge a
    report line, nor a bidi override (U+202E) reorder the rest of it."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


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
    fmt = source_format(path, args.format)
    if fmt == "dir":
        yield from load_directory(
            path,
            scope_id=args.scope,
            locale=args.locale,  # "": each page its own
            base_url=args.base_url,
            follow_symlinks=args.follow_symlinks,
            all_renderings=args.all_renderings,
            fallback_encoding=args.fallback_encoding,
            id_prefix=args.id_prefix,
        )
        return
    for item in load_beir_jsonl(
        path,
        scope_id=args.scope,
        locale=args.locale or DEFAULT_LOCALE,
        title_as_heading=args.title_as_heading,
    ):
        if isinstance(item, Document) and args.id_prefix:
            item = replace(item, doc_id=args.id_prefix + item.doc_id)
        yield item


def source_format(path: Path, fmt: str) -> str:
    """ "dir" or "beir" for `path` (NotFound, InvalidArgument when it is neither),
    checked before any service is asked."""
    if not path.exists():
        raise NotFound(f"PATH {str(path)!r} does not exist (a folder or a BEIR JSON-lines file)")
    if fmt == "auto" and path.is_file() and is_supported_name(path.name):
        # A page read as JSON lines would be one rejected line per line of it.
        raise InvalidArgument(
            f"PATH {str(path)!r} is a single page: give the folder that holds it "
            "(or --format beir if it is a JSON-lines file)"
        )
    if fmt == "auto":
        return "dir" if path.is_dir() else "beir"
    return fmt


def unsendable(doc: Document, max_chars: int) -> str | None:
    """Why `doc` cannot go to the Indexer as read, or None: a body over the
    limit, or a field holding a lone surrogate (a `\\ud800` escape in JSON or
    YAML front matter decodes to one; UTF-8 cannot carry it)."""
    if len(doc.text) > max_chars:
        return f"text: {len(doc.text)} characters, limit is {max_chars} (--max-document-chars)"
    fields = {"doc_id": doc.doc_id, "scope_id": doc.scope_id, "title": doc.title, "url": doc.url}
    fields |= {"text": doc.text}
    fields |= {"locale": doc.locale, "updated_at": doc.updated_at}
    fields |= {f"metadata[{k!r}]": f"{k}={v}" for k, v in doc.metadata.items()}
    for name, value in fields.items():
        if (found := _SURROGATE.search(value)) is not None:
            return f"{name}: holds a lone surrogate (U+{ord(found.group()):04X}), not text"
    return None


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
        self.max_document_chars = args.max_document_chars or max_document_chars_from_env()
        # `skipped`: what is left out by rule (links, FIFOs, pages with
        # nothing to index), not counted as rejected.
        self.totals = dict.fromkeys([*_COUNT_FIELDS, "skipped"], 0)
        self.rejected: list[str] = []
        self.skipped: list[str] = []  # left out by rule (a link, a FIFO): reported, not failures
        self.unread: list[str] = []  # sources that could not be read (files, folders)
        self.sync_skipped = ""
        self.sync_refused = False
        self.pages = 0  # documents of the source with something to index
        self.kept: list[pb.DocumentKey] = []
        # The generation the first batch's reply reported (services/indexer/sync_guard.py).
        self.first_generation: int | None = None
        # (doc_id, state) of every document the run (or plan) changes.
        self.differing: list[tuple[str, str]] = []
        self.owned_elsewhere = 0  # rejected: the id is another scope's document

    def run(self) -> int:
        self.collect()
        self._report()
        return 1 if self.rejected or self.sync_refused else 0

    def collect(self) -> None:
        """Send the whole source (and the Sync, with --sync); totals, rejections
        and differing documents accumulate on `self`."""
        docs = self._valid_documents(iter_source(self.args))
        bar = tqdm(desc="documents", unit="doc", disable=self.args.quiet)
        for batch in batches(docs, self.args.batch, self.args.batch_chars):
            self._send(batch, bar)
        bar.close()
        if self.args.sync and self.unread:
            # As rsync skips deletion after an I/O error: a file that exists
            # but could not be read this time (mid-save, a permission, a
            # folder that cannot be listed) is absent from the keep list, and
            # the Sync would remove its indexed pages.
            named = ", ".join(map(printable, self.unread[:3])) + (", ..." * (len(self.unread) > 3))
            self.sync_skipped = (
                f"sync skipped: {len(self.unread)} source(s) could not be read ({named}), so "
                "what is gone cannot be told from what was unreadable; nothing was removed "
                "(make them readable, or move them out of the source, and run it again)"
            )
        elif self.args.sync and not self.pages and not getattr(self.args, "allow_empty_sync", 0):
            # An empty mount or a wrong folder would otherwise remove every
            # page of the scope, and say "done".
            self.sync_refused = True
            holds = (
                "every page of the source is indexed in another scope"
                if self.owned_elsewhere
                else "the source holds no page with anything to index"
            )
            self.sync_skipped = (
                f"sync refused: {holds}, so it would remove every page of scope "
                f"{self.args.scope!r}; nothing was removed (--allow-empty-sync empties the scope)"
            )
        elif self.args.sync:
            self._sync()

    def _sync(self) -> None:
        """The Sync step; refused (exit status 1, the batches' counts still
        reported) when another sync of the scope came between."""
        try:
            reply = self.client.sync(
                self.args.scope,
                self.kept,
                dry_run=self.args.dry_run,
                deadline=SYNC_TIMEOUT_S,
                no_sync_since=self.first_generation,
            )
        except Aborted as exc:  # services/indexer/sync_guard.py
            self.sync_refused = True
            self.sync_skipped = f"sync refused: {exc.details.removeprefix('no_sync_since: ')}"
            return
        self._add(reply)

    def _valid_documents(self, items: Iterable[Document | LoadError]) -> Iterator[Document]:
        """Documents that can be sent; the rest rejected here, each with its
        reason, so that one file never stops the load."""
        for item in items:
            if isinstance(item, LoadError) and item.skipped:
                self.skipped.append(f"{item.source}: {item.reason}")
                continue
            if isinstance(item, LoadError):
                self._rejected_here(f"{item.source}: {item.reason}")
                self.unread.append(item.source)
                continue
            problem = unsendable(item, self.max_document_chars)
            if problem is None:
                yield item
                continue
            # Rejected here rather than by the Indexer (a lone surrogate is no
            # protobuf string, an over-long body can exceed the message limit
            # and fail its whole batch). As for a document the Indexer
            # rejects, its indexed version stays: kept, when its key can be sent.
            self._rejected_here(f"{_SURROGATE.sub('?', item.doc_id)}: {problem}")
            self.pages += 1
            if _SURROGATE.search(item.doc_id + item.locale):
                self.unread.append(_SURROGATE.sub("?", item.doc_id))
            else:
                self.kept.append(pb.DocumentKey(doc_id=item.doc_id, locale=item.locale))

    def _rejected_here(self, line: str) -> None:
        """Counted with the Indexer's rejections: the summary's `rejected=`
        is every document that was not indexed, wherever it was refused."""
        self.rejected.append(line)
        self.totals["rejected"] += 1

    def _send(self, batch: list[Document], bar: tqdm) -> None:
        documents = [document_to_proto(d) for d in batch]
        self.pages += len(batch)
        done_before = bar.n
        progress = self.client.upsert_stream(
            documents, dry_run=self.args.dry_run, deadline=self.args.timeout
        )
        not_kept: set[tuple[str, str]] = set()
        for message in progress:
            bar.update(done_before + message.documents_done - bar.n)
            if message.HasField("result"):
                not_kept |= self._add(message.result)
                if self.first_generation is None:
                    self.first_generation = message.result.committed_generation
        self.kept.extend(
            pb.DocumentKey(doc_id=d.doc_id, locale=d.locale)
            for d in batch
            if (d.doc_id, canonical_language_tag(d.locale or "en")) not in not_kept
        )

    def _add(self, reply: pb.UpsertResponse) -> set[tuple[str, str]]:
        """Count `reply`; the keys of the documents the Sync must not keep:
        a page with nothing to index now (its indexed version is no longer
        the folder's: kept, it was served on), and a page the Indexer holds
        in another scope (not this scope's to keep; counted as a page, a
        wrong folder --synced into a scope whose pages all live elsewhere
        passed the empty-source guard and emptied the scope)."""
        not_kept: set[tuple[str, str]] = set()
        for name in _COUNT_FIELDS:
            self.totals[name] += getattr(reply.counts, name)
        for outcome in reply.outcomes:
            if outcome.error_code == EmptyDocument.code:
                # Not a failure of the load: a page with nothing to index (a
                # static site's front-matter-only section page) is skipped.
                self.skipped.append(f"{outcome.doc_id}: {outcome.error}")
                self.totals["rejected"] -= 1
                self.pages -= 1
                not_kept.add((outcome.doc_id, outcome.locale))
            elif outcome.state == pb.DOCUMENT_STATE_REJECTED:
                self.rejected.append(f"{outcome.doc_id}: {outcome.error}")
                if outcome.error_code == OWNED_ELSEWHERE_CODE:
                    self.owned_elsewhere += 1
                    self.pages -= 1
                    not_kept.add((outcome.doc_id, outcome.locale))
            elif outcome.state != pb.DOCUMENT_STATE_UNCHANGED:
                state = pb.DocumentState.Name(outcome.state).removeprefix("DOCUMENT_STATE_")
                self.differing.append((outcome.doc_id, state.lower()))
        return not_kept

    def _report(self) -> None:
        self.totals["skipped"] = len(self.skipped)  # each listed below
        prefix = "plan (dry run)" if self.args.dry_run else "done"
        print(f"{prefix}: " + ", ".join(f"{k}={v}" for k, v in self.totals.items()))
        for verb, lines in (("skipped", self.skipped), ("rejected", self.rejected)):
            for line in lines[:20]:
                print(f"{verb} {printable(line)}", file=sys.stderr)
            if len(lines) > 20:
                print(f"... and {len(lines) - 20} more {verb}", file=sys.stderr)
        if self.owned_elsewhere and not self.args.id_prefix:
            # Two sites ingested as two scopes both hold `index.html` (probe
            # on Debian's documentation packages): the second one's was lost.
            print(f"hint: {OWNED_ELSEWHERE_HINT}", file=sys.stderr)
        if self.sync_skipped:
            print(self.sync_skipped, file=sys.stderr)
