"""`LexicalStore` on tantivy: Lucene-style BM25 in-process, data in a folder.

Schema (see `lexical_fields`): the shared analyzer's terms in `title_terms`,
`heading_path_terms` and `text_terms`, split at spaces only (the `rag_terms`
tokenizer, so tantivy indexes exactly the analyzer's token stream); exact
identifier forms in `identifiers`; `chunk_id`, `doc_id`, `url`, `scope_id`,
`locale`, `content_hash` and the metadata terms (`meta`, one `key=value` term
per pair) as raw keywords for exact filters. The display fields (`title`,
`heading_path`, `text`) are stored bytes, not indexed, so a hit rebuilds a
`StoredChunk` without another lookup and a metadata-only update can rewrite a
document without losing its text.

The analysis that built an index is recorded next to it (`analysis.json`); an
index built by another analysis is refused at start-up with the re-index path,
because its terms would no longer match the queries' terms.

Concurrency: one `IndexWriter` owned by this object behind a lock (tantivy
allows one writer per directory). Each write batch is committed and the
reader reloaded before the call returns, so the next search sees it. A batch
that fails is dropped with its writer, and the next write opens a new one.
Searches take no lock: each grabs the current searcher snapshot, and tantivy
releases the GIL while searching.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import tantivy as tv

from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.deadline import Deadline
from services.core.errors import ConfigError, StoreUnavailable
from services.core.files import atomic_write_text
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.storage.base import SCAN_BATCH, call_budget_s, search_budget_s
from services.storage.embedded.tantivy_query import LexicalQueryBuilder
from services.storage.guards import check_folder, store_errors, unavailable_on_failure
from services.storage.lexical_fields import (
    FIELD_BOOSTS,
    IDENTIFIERS_FIELD,
    PlannedSearch,
    exact_first,
    index_format,
    terms_field,
)
from services.storage.payload import (
    GENERATION_FIELD,
    METADATA_TERMS_FIELD,
    chunk_with_payload,
    metadata_from_terms,
    metadata_term,
    metadata_terms,
)

_KEYWORD_FIELDS = ("chunk_id", "doc_id", "url", "scope_id", "locale", "content_hash")
_TERMS_TOKENIZER = "rag_terms"
ANALYSIS_FILE = "analysis.json"
_WRITER_HEAP_BYTES = 64_000_000
# One indexing thread: the machine's cores belong to the embedding model.
_WRITER_THREADS = 1


def build_schema() -> tv.Schema:
    builder = tv.SchemaBuilder()
    for field in (*_KEYWORD_FIELDS, METADATA_TERMS_FIELD):
        # "basic" indexing: filters need neither frequencies nor positions.
        builder.add_text_field(field, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field(IDENTIFIERS_FIELD, tokenizer_name="raw", index_option="basic")
    for field in FIELD_BOOSTS:
        builder.add_bytes_field(field, stored=True)
        builder.add_text_field(terms_field(field), tokenizer_name=_TERMS_TOKENIZER)
    builder.add_integer_field("position", stored=True)
    builder.add_integer_field(GENERATION_FIELD, stored=True, indexed=True, fast=True)
    return builder.build()


def _document(chunk: Chunk, analyzer: TextAnalyzer) -> tv.Document:
    doc = tv.Document()
    for field in _KEYWORD_FIELDS:
        doc.add_text(field, getattr(chunk, field))
    analyzed = analyzer.analyze_chunk(chunk.title, chunk.heading_path, chunk.text)
    for field in FIELD_BOOSTS:
        doc.add_bytes(field, getattr(chunk, field).encode())
        doc.add_text(terms_field(field), getattr(analyzed, field))
    for identifier in analyzed.identifiers.split():
        doc.add_text(IDENTIFIERS_FIELD, identifier)
    for term in metadata_terms(chunk.metadata):
        doc.add_text(METADATA_TERMS_FIELD, term)
    doc.add_integer("position", chunk.position)
    doc.add_integer(GENERATION_FIELD, chunk.generation)
    return doc


def _text(doc: tv.Document, field: str) -> str:
    value = doc.get_first(field)
    return bytes(value).decode() if value else ""


def _stored_chunk(doc: tv.Document) -> StoredChunk:
    # get_first per field: several times cheaper than doc.to_dict() (measured),
    # which matters at tens of hits per search.
    first = doc.get_first
    return StoredChunk(
        chunk_id=first("chunk_id") or "",
        doc_id=first("doc_id") or "",
        position=first("position") or 0,
        text=_text(doc, "text"),
        url=first("url") or "",
        title=_text(doc, "title"),
        heading_path=_text(doc, "heading_path"),
        scope_id=first("scope_id") or "",
        locale=first("locale") or "",
        content_hash=first("content_hash") or "",
        metadata=metadata_from_terms(doc.get_all(METADATA_TERMS_FIELD)),
        generation=first(GENERATION_FIELD) or 0,
    )


def check_analysis(path: Path, analyzer: TextAnalyzer) -> None:
    """Refuse an index built by another analysis; record ours on a new one."""
    record = path / ANALYSIS_FILE
    built_with = _recorded_analysis(record)
    if built_with is None and (path / "meta.json").exists():
        built_with = "1 (words only: no identifier field, no CJK segmentation)"
    expected = index_format(analyzer)
    if built_with is not None and built_with != expected:
        raise ConfigError(
            f"the lexical index {path} was built with lexical analysis {built_with}, but this "
            f"version analyses text as {expected} (RAG_LEXICAL_CJK): its terms or row layout "
            "would not match. Re-index into a fresh RAG_DATA_DIR (see docs/indexing.md, "
            "'Re-indexing after an analysis change'), or run the release that built it"
        )
    if built_with is None:
        # Written whole or not at all: a torn record would look like a foreign index.
        atomic_write_text(record, json.dumps({"analysis": expected}))


def _recorded_analysis(record: Path) -> str | None:
    if not record.exists():
        return None
    try:
        return str(json.loads(record.read_text())["analysis"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{record} is not a lexical analysis record ({exc}); it names the analysis that "
            "built the index next to it. Restore it, or re-index into a fresh RAG_DATA_DIR"
        ) from exc


class TantivyLexicalStore(PlannedSearch):
    """BM25 over title + heading_path + text, persisted in `path`."""

    def __init__(
        self,
        path: Path,
        *,
        name: str = "tantivy",
        field_boosts: Mapping[str, float] = FIELD_BOOSTS,
        analyzer: TextAnalyzer | None = None,
    ) -> None:
        self.name = name
        self._path = Path(path)
        self.analyzer = analyzer or TextAnalyzer()
        self.field_boosts = dict(field_boosts)
        self._schema = build_schema()
        self._queries = LexicalQueryBuilder(self._schema, field_boosts)
        self._write_lock = threading.Lock()
        self._path.mkdir(parents=True, exist_ok=True)
        check_analysis(self._path, self.analyzer)
        try:
            self._index: tv.Index | None = tv.Index(self._schema, path=str(self._path), reuse=True)
            self._index.register_tokenizer(
                _TERMS_TOKENIZER, tv.TextAnalyzerBuilder(tv.Tokenizer.whitespace()).build()
            )
            self._writer: tv.IndexWriter | None = None
            self._open_writer()  # takes the directory's lock now: a second writer fails here
        except ValueError as exc:  # schema mismatch, or another writer holds the lock
            raise ConfigError(f"cannot open lexical index {self._path}: {exc}") from exc

    # -- reads ---------------------------------------------------------------

    def _searcher(self) -> tv.Searcher:
        index = self._index
        if index is None:
            raise StoreUnavailable(f"{self.name}: store is closed")
        return index.searcher()

    def search_plan(
        self, plan: QueryPlan, limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        if limit <= 0 or plan.is_empty():
            return []
        search_budget_s(self.name, deadline)
        # Whole rows: a hit's stored document is read anyway (for its chunk_id),
        # and its text gives `exact`; a second phase would only read it again.
        with store_errors(self.name, "search"):
            text_query = self._queries.build(plan)
            searcher = self._searcher()
            filters = self._filter_query(scope, searcher)
            if filters is not None:
                # Filters must not move BM25 scores: they only narrow the candidates.
                no_score = tv.Query.const_score_query(filters, 0.0)
                text_query = tv.Query.boolean_query(
                    [(tv.Occur.Must, text_query), (tv.Occur.Must, no_score)]
                )
            result = searcher.search(text_query, limit, count=False)
            hits = [
                ScoredChunk(_stored_chunk(searcher.doc(address)), float(score))
                for score, address in result.hits
            ]
        return exact_first(hits, plan)

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        wanted = sorted(set(chunk_ids))
        if not wanted:
            return []
        search_budget_s(self.name, deadline)
        query = tv.Query.term_set_query(self._schema, "chunk_id", wanted)
        with store_errors(self.name, "get"):
            searcher = self._searcher()
            result = searcher.search(query, len(wanted), count=False)
            return [_stored_chunk(searcher.doc(address)) for _, address in result.hits]

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        """Every stored chunk, `batch` at a time, from one searcher snapshot
        (so pages neither skip nor repeat rows while writes go on)."""
        with store_errors(self.name, "scan"):
            searcher = self._searcher()
        total = int(searcher.num_docs)
        for offset in range(0, total, batch):
            with store_errors(self.name, "scan"):
                result = searcher.search(tv.Query.all_query(), batch, count=False, offset=offset)
                yield [_stored_chunk(searcher.doc(address)) for _, address in result.hits]

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        call_budget_s(self.name, deadline, what="a count")
        filters = self._filter_query(scope)
        with store_errors(self.name, "count"):
            searcher = self._searcher()
            if filters is None:
                return int(searcher.num_docs)
            result = searcher.search(filters, 1, count=True)
            return int(result.count)  # type: ignore[attr-defined]  # missing from the stub

    def _filter_query(
        self, scope: ScopeFilter | None, searcher: tv.Searcher | None = None
    ) -> tv.Query | None:
        """ScopeFilter as keyword-term clauses that must all match. With the
        `searcher` that will run the query, the visibility clause is left out
        when that searcher holds no row it would hide."""
        if scope is None or scope.is_empty():
            return None
        clauses: list[tv.Query] = []
        for field, value in (("scope_id", scope.scope_id), ("locale", scope.locale)):
            if value:
                clauses.append(self._keyword(field, value))
        any_of = (("scope_id", scope.scope_ids), ("doc_id", scope.doc_ids), ("url", scope.urls))
        for field, values in any_of:
            if values:
                clauses.append(tv.Query.term_set_query(self._schema, field, list(values)))
        for key, value in scope.metadata:
            clauses.append(self._keyword(METADATA_TERMS_FIELD, metadata_term(key, value)))
        occurs = [(tv.Occur.Must, clause) for clause in clauses]
        if scope.visible_generation is not None:
            later = tv.Query.range_query(
                self._schema,
                GENERATION_FIELD,
                tv.FieldType.Integer,
                scope.visible_generation,
                None,
                include_lower=False,
            )
            # With no run in flight (the usual case) nothing is later than the
            # committed generation, and the clause would hide nothing yet still
            # intersect every document with the text query: at 1M chunks that
            # doubled BM25 time (5.5 -> 10.3 ms p50, bench.scale's index).
            if searcher is None or searcher.search(later, 1, count=False).hits:
                # A pure MustNot query matches nothing: pair it with all documents.
                occurs += [(tv.Occur.Must, tv.Query.all_query()), (tv.Occur.MustNot, later)]
        return tv.Query.boolean_query(occurs) if occurs else None

    def _keyword(self, field: str, value: str) -> tv.Query:
        return tv.Query.term_query(self._schema, field, value, index_option="basic")

    # -- writes --------------------------------------------------------------

    def upsert(self, chunks: Sequence[Chunk], deadline: Deadline) -> None:
        if chunks:
            call_budget_s(self.name, deadline, what="an upsert")
            docs = [(chunk.chunk_id, _document(chunk, self.analyzer)) for chunk in chunks]
            self._write("upsert", docs)

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        """Rewrite the non-text fields of existing chunks; unknown ids are ignored."""
        if not updates:
            return
        call_budget_s(self.name, deadline, what="a payload update")
        with self._write_lock:
            # Part of this write, whose deadline was checked above.
            ids = [chunk_id for chunk_id, _ in updates]
            current = {c.chunk_id: c for c in self.get(ids, Deadline.never())}
            rewrites = [
                (chunk_id, _document(chunk_with_payload(current[chunk_id], payload), self.analyzer))
                for chunk_id, payload in updates
                if chunk_id in current
            ]
            self._apply("update payload", rewrites)

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        if chunk_ids:
            call_budget_s(self.name, deadline, what="a delete")
            self._write("delete", [(chunk_id, None) for chunk_id in chunk_ids])

    def _write(self, action: str, changes: Sequence[tuple[str, tv.Document | None]]) -> None:
        with self._write_lock:
            self._apply(action, changes)

    def _apply(self, action: str, changes: Sequence[tuple[str, tv.Document | None]]) -> None:
        """Replace (or, for None, remove) each chunk, then commit once.

        Delete-then-add is idempotent: a delete only hides documents added
        before it, so re-running the same batch leaves exactly one copy."""
        if not changes:
            return
        with store_errors(self.name, action):
            index, writer = self._open_writer()
            try:
                for chunk_id, doc in changes:
                    writer.delete_documents_by_term("chunk_id", chunk_id)
                    if doc is not None:
                        writer.add_document(doc)
                writer.commit()
            except BaseException:
                self._writer = None  # see _open_writer
                del writer  # its uncommitted batch goes with it, and its lock
                raise
            index.reload()

    def _open_writer(self) -> tuple[tv.Index, tv.IndexWriter]:
        """The writer, opened again after a failed write. A writer whose commit
        failed can be dead for good: after one "Too many open files" in a
        commit, tantivy's writer threads had panicked and every later write
        failed ("does not have any lock") until the process restarted. A
        fresh writer is cheap next to that, and dropping the old one is what
        discards its half-applied batch."""
        index = self._index
        if index is None:
            raise StoreUnavailable(f"{self.name}: store is closed")
        if self._writer is None:
            self._writer = index.writer(heap_size=_WRITER_HEAP_BYTES, num_threads=_WRITER_THREADS)
        return index, self._writer

    # -- lifecycle -----------------------------------------------------------

    def ping(self) -> None:
        with unavailable_on_failure(self.name):
            check_folder(self.name, self._path)
            self._searcher().num_docs  # noqa: B018 - touching the reader is the check

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        return False  # local files: a failed write is an error, never retried

    def close(self) -> None:
        with self._write_lock:
            writer, self._writer = self._writer, None
            self._index = None
            if writer is not None:
                with store_errors(self.name, "close"):
                    # Consumes the writer and releases the directory lock.
                    writer.wait_merging_threads()
