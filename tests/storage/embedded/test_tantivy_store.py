"""tantivy specifics beyond the conformance suite: the directory lock and
concurrent use."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.core.models import ScopeFilter, ScoredChunk
from services.storage.base import unrequested_deadline
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from tests.storage.harness import COMMON_WORD, make_chunk, searches_meanwhile

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
    store.upsert([make_chunk(f"doc-base-{n}") for n in range(20)], deadline=unrequested_deadline())

    def search() -> list[ScoredChunk]:
        return store.search(COMMON_WORD, 10, ScopeFilter(), deadline=unrequested_deadline())

    try:
        with searches_meanwhile(search, hits=10):
            for batch in range(10):
                store.upsert(
                    [make_chunk(f"doc-w{batch}-{n}") for n in range(5)],
                    deadline=unrequested_deadline(),
                )
                # Every committed batch is visible to the very next search.
                assert (
                    store.count(
                        ScopeFilter(doc_ids=(f"doc-w{batch}-0",)), deadline=unrequested_deadline()
                    )
                    == 1
                )
    finally:
        store.close()


def test_an_index_built_by_an_older_analysis_is_refused_with_the_way_out(tmp_path: Path) -> None:
    old = tmp_path / "lexical"
    old.mkdir()
    (old / "meta.json").write_text("{}")  # a tantivy index from before analysis was recorded
    with pytest.raises(ConfigError) as refused:
        TantivyLexicalStore(old)
    message = str(refused.value)
    assert "lexical analysis 1" in message and "Re-index into a fresh RAG_DATA_DIR" in message


def test_changing_the_cjk_mode_needs_a_reindex(tmp_path: Path) -> None:
    from services.core.analysis import CjkMode, TextAnalyzer

    store = TantivyLexicalStore(tmp_path / "lexical", analyzer=TextAnalyzer(CjkMode.WORDS))
    store.upsert([make_chunk("doc-1", text="分块大小")], deadline=unrequested_deadline())
    store.close()
    with pytest.raises(ConfigError, match=r"cjk=words.*cjk=bigrams"):
        TantivyLexicalStore(tmp_path / "lexical", analyzer=TextAnalyzer(CjkMode.BIGRAMS))
    reopened = TantivyLexicalStore(tmp_path / "lexical", analyzer=TextAnalyzer(CjkMode.WORDS))
    assert reopened.count(None, unrequested_deadline()) == 1
    reopened.close()


def test_a_torn_analysis_record_is_a_clear_start_up_error(tmp_path: Path) -> None:
    TantivyLexicalStore(tmp_path / "lexical").close()
    (tmp_path / "lexical" / "analysis.json").write_text('{"analy')
    with pytest.raises(ConfigError, match="not a lexical analysis record"):
        TantivyLexicalStore(tmp_path / "lexical")


def test_the_index_records_its_analysis_and_row_layout(tmp_path: Path) -> None:
    TantivyLexicalStore(tmp_path / "lexical").close()
    record = json.loads((tmp_path / "lexical" / "analysis.json").read_text())
    assert record == {"analysis": "2;cjk=words;rows=2"}


def test_an_index_from_before_generations_needs_a_reindex(tmp_path: Path) -> None:
    TantivyLexicalStore(tmp_path / "lexical").close()
    # What the previous release recorded: the same analysis, rows without a generation.
    (tmp_path / "lexical" / "analysis.json").write_text(json.dumps({"analysis": "2;cjk=words"}))
    with pytest.raises(ConfigError, match=r"analysis 2;cjk=words, .* 2;cjk=words;rows=2"):
        TantivyLexicalStore(tmp_path / "lexical")


def test_visibility_clause_only_when_a_row_is_hidden(tmp_path: Path) -> None:
    # With no uncommitted row the clause would hide nothing yet intersect every
    # document with the text query (twice the BM25 time at 1M chunks): left out.
    store = TantivyLexicalStore(tmp_path / "lexical")
    store.upsert(
        [replace(make_chunk(f"doc-{n}"), generation=1) for n in range(3)],
        deadline=unrequested_deadline(),
    )
    visible = ScopeFilter(visible_generation=1)
    assert store._filter_query(visible, store._searcher()) is None
    store.upsert([replace(make_chunk("doc-later"), generation=2)], deadline=unrequested_deadline())
    assert store._filter_query(visible, store._searcher()) is not None
    hits = store.search(COMMON_WORD, 10, visible, deadline=unrequested_deadline())
    assert sorted(h.chunk.doc_id for h in hits) == ["doc-0", "doc-1", "doc-2"]
    store.close()
