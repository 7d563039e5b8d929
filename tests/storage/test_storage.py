"""The index facade on real embedded stores and the real model: a ChunkWriter
reaches both stores (or the one a repair names), embeds with the document
prompt, reports each store call to its timer; the facade hands out the lexical
analysis and query description it declares."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np
import pytest

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded
from services.core.models import ScopeFilter
from services.embedding.embedder import Embedder
from services.storage.base import unrequested_deadline
from services.storage.factory import open_storage
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import ChunkWriter, Part, Storage, embedding_text
from tests.storage.harness import make_chunk, payload_of

pytestmark = pytest.mark.integration


@pytest.fixture
def storage(tmp_path: Path, embedder: Embedder) -> Iterator[Storage]:
    settings = StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED)
    opened = open_storage(settings, embedder.dim)
    yield opened
    opened.close()


def _counts(storage: Storage) -> tuple[int, int]:
    return storage.vectors.count(None, unrequested_deadline()), storage.lexical.count(
        None, unrequested_deadline()
    )


def test_a_writer_writes_rewrites_and_deletes_in_both_stores(
    storage: Storage, embedder: Embedder
) -> None:
    calls: list[str] = []

    def timed(part: str) -> AbstractContextManager[object]:
        calls.append(part)
        return nullcontext()

    writer = storage.writer(embedder, timed=timed)
    chunks = [make_chunk("guide", i, text=f"restore a backup, step {i}") for i in range(3)]
    writer.write(chunks, deadline=unrequested_deadline())
    assert _counts(storage) == (3, 3)
    assert calls == [Part.VECTOR, Part.LEXICAL]
    query = embedder.embed_query("how do I restore a backup").tolist()
    assert (
        storage.vectors.search(query, 1, ScopeFilter(), deadline=unrequested_deadline())[
            0
        ].chunk.doc_id
        == "guide"
    )
    renamed = [(chunks[0].chunk_id, payload_of(chunks[0], title="Backups"))]
    writer.rewrite(renamed, unrequested_deadline())
    for store in (storage.vectors, storage.lexical):
        assert (
            store.get([chunks[0].chunk_id], deadline=unrequested_deadline())[0].title == "Backups"
        )
    writer.delete([chunks[0].chunk_id], unrequested_deadline())
    assert _counts(storage) == (2, 2)


def test_vectors_come_from_the_embedding_text(storage: Storage, embedder: Embedder) -> None:
    chunk = make_chunk("guide", text="Run the restore command.", heading_path="Ops > Backups")
    writer = storage.writer(embedder)
    expected = embedder.embed_documents([embedding_text(chunk)])
    np.testing.assert_allclose(writer.embed([chunk]), expected, atol=1e-5)
    assert embedding_text(chunk) == "Ops > Backups\n\nRun the restore command."


def test_a_one_store_writer_leaves_the_other_alone(storage: Storage, embedder: Embedder) -> None:
    chunk = make_chunk("guide")
    storage.writer(embedder, frozenset({Part.LEXICAL})).write(
        [chunk], deadline=unrequested_deadline()
    )
    assert _counts(storage) == (0, 1)
    storage.writer(embedder, frozenset({Part.VECTOR})).write(
        [chunk], deadline=unrequested_deadline()
    )
    assert _counts(storage) == (1, 1)


@pytest.mark.parametrize("parts", [frozenset(), frozenset({Part.MANIFEST})])
def test_a_writer_writes_chunk_stores_only(
    storage: Storage, embedder: Embedder, parts: frozenset[Part]
) -> None:
    with pytest.raises(ValueError, match="parts"):
        ChunkWriter(embedder, storage.vectors, storage.lexical, parts)


def test_the_facade_declares_analysis_and_retries(storage: Storage) -> None:
    assert storage.analyzer is storage.lexical.analyzer
    assert storage.describe_query("rate limits 429") == storage.lexical.describe_query(
        "rate limits 429"
    )
    assert "429" in storage.describe_query("rate limits 429")
    # Embedded stores and the SQLite manifest write local files: nothing retries.
    assert storage.observe_write_retries(lambda part: None) == []


def test_a_write_past_its_deadline_changes_no_store(storage: Storage, embedder: Embedder) -> None:
    writer = storage.writer(embedder)
    chunks = [make_chunk("guide", text="restore a backup")]
    with pytest.raises(DeadlineExceeded):
        writer.write(chunks, deadline=Deadline.after(-1.0))
    assert _counts(storage) == (0, 0)
