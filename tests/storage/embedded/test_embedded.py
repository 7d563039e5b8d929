"""Opening the embedded store pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.core.models import ScopeFilter
from services.storage.base import LexicalStore, VectorStore, unrequested_deadline
from services.storage.embedded.stores import open_embedded_stores
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from tests.storage.harness import COMMON_WORD, DIM, make_chunk, seeded_vector

pytestmark = pytest.mark.integration


def test_pair_lives_in_subfolders_and_survives_reopening(tmp_path: Path) -> None:
    vectors, lexical = open_embedded_stores(tmp_path, DIM)
    assert isinstance(vectors, VectorStore) and isinstance(lexical, LexicalStore)
    chunk = make_chunk("doc-1")
    vectors.upsert([chunk], [seeded_vector("a")], deadline=unrequested_deadline())
    lexical.upsert([chunk], deadline=unrequested_deadline())
    vectors.close()
    lexical.close()
    assert (tmp_path / "vectors").is_dir() and (tmp_path / "lexical").is_dir()

    vectors, lexical = open_embedded_stores(tmp_path, DIM)
    try:
        assert [
            c.chunk_id for c in vectors.get([chunk.chunk_id], deadline=unrequested_deadline())
        ] == [chunk.chunk_id]
        assert (
            len(lexical.search(COMMON_WORD, 5, ScopeFilter(), deadline=unrequested_deadline())) == 1
        )
    finally:
        vectors.close()
        lexical.close()


def test_failed_lexical_open_releases_the_vector_store(tmp_path: Path) -> None:
    holder = TantivyLexicalStore(tmp_path / "lexical")  # keeps the writer lock
    try:
        with pytest.raises(ConfigError):
            open_embedded_stores(tmp_path, DIM)
    finally:
        holder.close()
    vectors, lexical = open_embedded_stores(tmp_path, DIM)
    vectors.close()
    lexical.close()
