"""tantivy specifics beyond the conformance suite: the directory lock and
concurrent use."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from services.common.errors import ConfigError
from services.common.models import ScopeFilter
from services.common.stores.tantivy_store import TantivyLexicalStore
from tests.common.stores.harness import COMMON_WORD, make_chunk

pytestmark = pytest.mark.integration


def test_a_second_writer_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    first = TantivyLexicalStore(tmp_path / "lexical")
    try:
        with pytest.raises(ConfigError, match="lexical"):
            TantivyLexicalStore(tmp_path / "lexical")
    finally:
        first.close()
    TantivyLexicalStore(tmp_path / "lexical").close()  # released on close


def test_searches_run_while_a_writer_commits(tmp_path: Path) -> None:
    store = TantivyLexicalStore(tmp_path / "lexical")
    store.upsert([make_chunk(f"doc-base-{n}") for n in range(20)])
    errors: list[BaseException] = []
    done = threading.Event()

    def search_until_done() -> None:
        try:
            while not done.is_set():
                assert len(store.search(COMMON_WORD, 10, ScopeFilter())) == 10
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=search_until_done) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        for batch in range(10):
            store.upsert([make_chunk(f"doc-w{batch}-{n}") for n in range(5)])
            # Every committed batch is visible to the very next search.
            assert store.count(ScopeFilter(doc_ids=(f"doc-w{batch}-0",))) == 1
    finally:
        done.set()
        for reader in readers:
            reader.join()
        store.close()
    assert errors == []
