"""`Storage`: the one index facade, and `ChunkWriter`: the one place a change
reaches both stores.

An index is three parts that only make sense together: the vector store, the
lexical store and the manifest that says which of their rows are committed.
Services, the run journal, the verifier, metrics and health checks take one
`Storage` and reach its parts only through members the protocols declare
(`base.VectorStore`, `base.LexicalStore`, `manifest.Manifest`): the lexical
store's `analyzer` and `describe_query`, and every part's
`observe_write_retries`, are declared there, never probed for. Reads stay per
channel (a Retrieve degrades per channel); writes go through a `ChunkWriter`:
embed, then write, rewrite or delete in both stores, in that order, so "the
vector store has it, the lexical store does not" is only ever the state of a
run in flight (which the manifest's intents undo) or of a repair of one store.
Where one database holds all three parts (PostgreSQL), `run_transaction`
makes a whole run one transaction; elsewhere the journal's intents and the
generation rule make it all-or-nothing. A writer's calls take the run's
deadline, which every store call honours (`base.call_budget_s`). Embedded, server and PostgreSQL
implementations are chosen by `factory.open_storage`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Protocol

import numpy as np

from services.core.analysis import TextAnalyzer
from services.core.deadline import Deadline
from services.core.embedded_text import embedding_text as embedding_text
from services.core.models import Chunk, ChunkPayload, StoredChunk
from services.storage.base import LexicalStore, VectorStore
from services.storage.disk_room import DiskRoom
from services.storage.manifest import Manifest
from services.storage.payload import chunk_with_payload, payload_of_stored

Timer = Callable[[str], AbstractContextManager[object]]


class Part(StrEnum):
    """The parts of an index, as metrics and reports label them."""

    VECTOR = "vector"
    LEXICAL = "lexical"
    MANIFEST = "manifest"


class DocumentEncoder(Protocol):
    """What a writer needs of an embedding model (services.embedding.embedder.Embedder)."""

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray: ...


class AtomicRuns(Protocol):
    """A backend that can commit a run's writes to all three parts at once
    (`postgres_run.RunConnection`)."""

    def transaction(self) -> AbstractContextManager[None]: ...


def chunk_from_stored(row: StoredChunk) -> Chunk:
    """A stored row as the chunk that writes it back unchanged."""
    return chunk_with_payload(row, payload_of_stored(row))


def split_rows(
    rows: np.ndarray, second_dim: int
) -> tuple[list[list[float]], list[list[float]] | None]:
    """`ChunkWriter.embed`'s rows as (first vectors, second vectors or None)."""
    if not second_dim:
        return rows.tolist(), None
    return rows[:, :-second_dim].tolist(), rows[:, -second_dim:].tolist()


def _untimed(_part: str) -> AbstractContextManager[object]:
    return nullcontext()


class ChunkWriter:
    """Embed, then write / rewrite / delete chunks in the stores of `parts`
    (both by default; one for a repair of one store). `timed(part)` wraps
    each store call (the Indexer's write metrics and spans). Each call takes
    the deadline of the run it belongs to (`unrequested_deadline()` for work
    no request covers: the stores' own timeouts decide), required per call
    because one writer serves every run of a pipeline and the journal's undo,
    which must not inherit a failed run's deadline."""

    def __init__(
        self,
        encoder: DocumentEncoder,
        vectors: VectorStore,
        lexical: LexicalStore,
        parts: frozenset[Part] = frozenset({Part.VECTOR, Part.LEXICAL}),
        timed: Timer = _untimed,
        second_encoder: DocumentEncoder | None = None,
    ) -> None:
        """`second_encoder`: the model of the chunks' second vector (the
        vector store's `second_dim` columns of every row `embed` returns)."""
        if not parts or Part.MANIFEST in parts:
            raise ValueError(f"parts: {sorted(parts)} must be vector and/or lexical")
        # Without a second encoder a store that has a second vector refuses
        # the writes (base.check_second_vectors): never a chunk without one.
        self.second_dim = vectors.second_dim if second_encoder is not None else 0
        if second_encoder is not None and not self.second_dim:
            raise ValueError("a second encoder, but the vector store has no second vector")
        self.encoder, self.vectors, self.lexical = encoder, vectors, lexical
        self.parts, self.timed = parts, timed
        self.second_encoder = second_encoder

    def embed(
        self, chunks: Sequence[Chunk], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        """The chunks' vectors, one row each: the first model's, followed by
        the second's where the store has a second vector (`write` splits
        them); `between` runs before each embedding pass (a run's deadline
        check: it raises to stop)."""
        texts = [embedding_text(chunk) for chunk in chunks]
        if self.second_encoder is None:
            return self.encoder.embed_documents(texts, between=between)
        # The two models side by side: each leaves a core idle part of the
        # time (tokenizing in Python, mUSE on one thread when index work is
        # lowered), and the thread started here keeps this one's priority.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="second-vector") as pool:
            second = pool.submit(self.second_encoder.embed_documents, texts, between)
            first = self.encoder.embed_documents(texts, between=between)
            return np.hstack([first, second.result()])

    def write(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray | None = None,
        *,
        deadline: Deadline,
    ) -> None:
        """Insert or replace whole chunks; `vectors` from `embed` (None: embedded
        here, when the vector store is written)."""
        if not chunks:
            return
        if Part.VECTOR in self.parts:
            rows = self.embed(chunks) if vectors is None else vectors
            first, second = split_rows(rows, self.second_dim)
            with self.timed(Part.VECTOR):
                self.vectors.upsert(chunks, first, deadline=deadline, second_vectors=second)
        if Part.LEXICAL in self.parts:
            with self.timed(Part.LEXICAL):
                self.lexical.upsert(chunks, deadline=deadline)

    def rewrite(self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline) -> None:
        """Rewrite payload fields, keeping text and vectors."""
        if Part.VECTOR in self.parts:
            with self.timed(Part.VECTOR):
                self.vectors.update_payload(updates, deadline=deadline)
        if Part.LEXICAL in self.parts:
            with self.timed(Part.LEXICAL):
                self.lexical.update_payload(updates, deadline=deadline)

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        if Part.VECTOR in self.parts:
            with self.timed(Part.VECTOR):
                self.vectors.delete(chunk_ids, deadline=deadline)
        if Part.LEXICAL in self.parts:
            with self.timed(Part.LEXICAL):
                self.lexical.delete(chunk_ids, deadline=deadline)


@dataclass
class Storage:
    """One index: its vector store, its lexical store and the manifest that
    says which of their rows are committed. Opened and closed together, so an
    audit or a service never holds half of an index."""

    vectors: VectorStore
    lexical: LexicalStore
    manifest: Manifest
    atomic_runs: AtomicRuns | None = None
    # The model of the chunks' second vector (RAG_CROSS_LINGUAL_MODEL; set by
    # whoever opened the index with one, services.runtime.parts).
    second_encoder: DocumentEncoder | None = None
    # Embedded: the data folder's disk, checked before a run writes
    # (services.storage.disk_room); None where a server holds the data.
    disk_room: DiskRoom | None = None

    @contextmanager
    def run_transaction(self) -> Iterator[bool]:
        """The block as one transaction over all three parts where the
        backend has one: yields True, and an exception leaves nothing
        written, so there is nothing to undo. Elsewhere a plain block
        (False): the run journal's intents undo a failed run."""
        if self.atomic_runs is None:
            yield False
            return
        with self.atomic_runs.transaction():
            yield True

    @property
    def analyzer(self) -> TextAnalyzer:
        """The lexical store's analysis: queries, identifiers and highlights
        are read exactly as the index was written."""
        return self.lexical.analyzer

    def describe_query(self, query: str) -> str:
        """The lexical query `query` becomes, for debug reports."""
        return self.lexical.describe_query(query)

    def writer(
        self,
        encoder: DocumentEncoder,
        parts: frozenset[Part] = frozenset({Part.VECTOR, Part.LEXICAL}),
        timed: Timer = _untimed,
    ) -> ChunkWriter:
        return ChunkWriter(encoder, self.vectors, self.lexical, parts, timed, self.second_encoder)

    def observe_write_retries(self, on_retry: Callable[[Part], None]) -> list[Part]:
        """Have `on_retry(part)` called before each retried write; the parts
        that retry at all (server stores; embedded ones write local files)."""
        return [
            part
            for part, store in self.parts().items()
            if store.observe_write_retries(partial(on_retry, part))
        ]

    def parts(self) -> dict[Part, VectorStore | LexicalStore | Manifest]:
        return {Part.VECTOR: self.vectors, Part.LEXICAL: self.lexical, Part.MANIFEST: self.manifest}

    def close(self) -> None:
        for part in (self.manifest, self.lexical, self.vectors):
            part.close()
