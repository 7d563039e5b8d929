"""Unit tests for HTML → Markdown on pages nested deeper than the renderer recurses."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.models import ContentType, Document
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.markup.html_markdown import MAX_RENDERED_DEPTH, html_to_markdown
from services.indexer.planning import DocState, Planner
from services.indexer.validation import DocumentLimits
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest

pytestmark = pytest.mark.unit

# Valid HTML (`</p>` may be left out), which the standard-library parser nests
# 600 levels deep: it once stopped the renderer with a RecursionError, an
# Upsert with INTERNAL for the whole batch and `ingest` of a folder with a
# traceback (tests/sources/test_loaders.py).
UNCLOSED_PARAGRAPHS = "<html><body>" + "".join(f"<p>para{i} " for i in range(600))


def test_unclosed_paragraphs_600_deep_keep_every_word() -> None:
    _, markdown = html_to_markdown(UNCLOSED_PARAGRAPHS)
    assert all(f"para{i}" in markdown for i in range(600))


def test_elements_below_the_depth_become_text_and_dropped_ones_go() -> None:
    deep = "<div>" * 5000 + "<script>evil()</script><b>deep</b> words" + "<span>" * 3000 + "end"
    _, markdown = html_to_markdown("<h1>Title</h1>" + deep)
    assert markdown.startswith("# Title\n\n")
    assert "deep words" in markdown and markdown.endswith("end")
    assert "evil" not in markdown


def test_structure_within_the_depth_is_rendered_as_before() -> None:
    nested = "<div>" * (MAX_RENDERED_DEPTH - 5) + "<h2>Deep</h2><ul><li>one</li></ul>"
    assert html_to_markdown(nested)[1] == "## Deep\n\n- one"


def test_a_deep_html_document_is_planned_not_refused(tmp_path: Path) -> None:
    manifest = SqliteManifest(tmp_path / "manifest.sqlite")
    planner = Planner(Chunker(ChunkingParams()), manifest, DocumentLimits())
    doc = Document(
        doc_id="deep",
        text=UNCLOSED_PARAGRAPHS,
        scope_id="site",
        content_type=ContentType.HTML,
    )
    (plan,) = planner.plan_upserts([doc], deadline=unrequested_deadline())
    manifest.close()
    assert plan.state is DocState.ADDED
