"""The third-party documentation corpus (scripts/fetch_doc_corpus.py) as the
Indexer sees it: loaded by the directory loader, normalised, chunked, and
checked against the chunker's guarantees (tests/support/chunk_invariants.py).
Used by tests/indexer/corpus/."""

from __future__ import annotations

import hashlib
import itertools
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.fetch_doc_corpus import (
    SOURCES,
    CorpusUnavailable,
    Source,
    StagedSource,
    corpus_dir,
    ensure_corpus,
    pages_dir,
)
from services.core.models import Document
from services.indexer.body import body_syntax
from services.indexer.chunking import Chunker
from services.indexer.work_budget import WorkMeter
from services.sources.loaders import LoadError, load_directory, normalize_body
from tests.support.chunk_invariants import assert_chunk_invariants, step_bound

SCOPE = "third-party-docs"
# An http(s) address per page, as an operator's --base-url gives: the
# loader's `file:` fallback is not what a published site sends.
BASE_URL = "https://docs.example/third-party/"


@dataclass(frozen=True)
class LoadedCorpus:
    sources: list[StagedSource]
    documents: list[Document]
    load_errors: list[LoadError]
    load_seconds: float


@dataclass(frozen=True)
class DocumentCheck:
    """One document through normalisation and the chunker."""

    doc_id: str
    chars: int
    chunks: int
    steps: int
    bound: int
    failure: str  # "" when every guarantee holds


def staged_corpus_or_fail(
    root: Path | None = None, sources: Sequence[Source] = SOURCES
) -> list[StagedSource]:
    """The staged sources, fetching what is missing; a corpus that cannot be
    had fails the test with the reason (CI has registry access, so a skip
    would hide a broken install step)."""
    try:
        return ensure_corpus(root or corpus_dir(), sources)
    except CorpusUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def load_corpus(root: Path, sources: list[StagedSource]) -> LoadedCorpus:
    """Every page through the directory loader, as `rag-indexer ingest
    --all-renderings` reads them (every file, the reST and AsciiDoc sources
    beside their HTML included: each is text the chunker must hold to its
    guarantees); doc_ids are `<source>/<path>`."""
    started = time.perf_counter()
    documents: list[Document] = []
    errors: list[LoadError] = []
    pages = pages_dir(root)
    for item in load_directory(pages, scope_id=SCOPE, base_url=BASE_URL, all_renderings=True):
        if isinstance(item, LoadError):
            errors.append(item)
        else:
            documents.append(item)
    return LoadedCorpus(sources, documents, errors, time.perf_counter() - started)


def source_of(doc_id: str) -> str:
    return doc_id.split("/", 1)[0]


def check_document(chunker: Chunker, doc: Document) -> DocumentCheck:
    """Chunk exactly the text the chunker sees in the Indexer (the normalised
    body) and hold it to every guarantee and to the step bound."""
    body = normalize_body(doc)
    bound = step_bound(body, chunker.params)
    # Limited at the bound: a chunker that stops making progress fails this
    # page by name instead of hanging the suite.
    meter = WorkMeter(limit=bound, what=doc.doc_id)
    try:
        syntax = body_syntax(doc)
        spans = chunker.split(body, meter, syntax)
        assert_chunk_invariants(body, spans, chunker.params, syntax)
        assert meter.steps <= bound, f"{meter.steps} chunking steps, bound {bound}"
    except Exception as exc:  # a crash is reported like a broken guarantee
        return DocumentCheck(doc.doc_id, len(body), 0, meter.steps, bound, _describe(exc))
    return DocumentCheck(doc.doc_id, len(body), len(spans), meter.steps, bound, "")


def _describe(exc: Exception) -> str:
    """The assertion's message, or (a bare `assert`) the failing line itself."""
    message = str(exc).strip()
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    where = f"{Path(frame.filename).name}:{frame.lineno}: {frame.line}"
    return f"{type(exc).__name__}: {message} ({where})" if message else f"{where}"


def has_chinese(doc: Document) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in doc.text)


def composition(documents: Iterable[Document]) -> Counter[tuple[str, str]]:
    """(source, file kind) → pages, kind from the file name's suffix."""
    return Counter((source_of(d.doc_id), Path(d.doc_id).suffix.lstrip(".")) for d in documents)


def deterministic_sample(
    documents: Sequence[Document], chunks: dict[str, int], size: int, max_chunks: int
) -> list[Document]:
    """`size` pages taken in turn from each source, each source's pages in the
    order of their doc_id's hash: every source and file kind is represented,
    and the same pages come out on every machine. Pages of more than
    `max_chunks` chunks are left out, so embedding them stays cheap."""
    by_source: dict[str, list[Document]] = {}
    for doc in sorted(documents, key=lambda d: hashlib.sha256(d.doc_id.encode()).hexdigest()):
        if 0 < chunks[doc.doc_id] <= max_chunks:
            by_source.setdefault(source_of(doc.doc_id), []).append(doc)
    turns = itertools.zip_longest(*(by_source[name] for name in sorted(by_source)))
    picked = (doc for turn in turns for doc in turn if doc is not None)
    return list(itertools.islice(picked, size))
