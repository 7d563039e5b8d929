"""What an `ingest --sync` keeps, against a real Indexer: the pages the
source holds now, and nothing the Indexer refused as not this scope's or as
empty (each found by a probe of incremental ingests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from tests.operator.test_cli import cli, counts
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


def _page(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")


def _doc_ids(stack: BackgroundStack, query: str, scope: str) -> list[str]:
    answer = stack.retrieve(
        query, top_k=5, disable_rerank=True, filter=rpb.ScopeFilter(scope_id=scope)
    )
    return [hit.doc_id for hit in answer.hits]


def test_a_wrong_folder_whose_pages_live_in_another_scope_removes_nothing(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    """Scopes swapped on the command line: every page of the source is
    another scope's, so the source holds nothing for this one. The Sync once
    removed the whole scope, the refused pages having passed the
    empty-source guard."""
    _page(tmp_path / "ra", "a.md", "# A\n\nThe alpha page about the aardvark.\n")
    _page(tmp_path / "rb", "b.md", "# B\n\nThe beta page about the bison.\n")
    assert cli(stack, "ingest", str(tmp_path / "ra"), "--scope", "ra").returncode == 0
    assert cli(stack, "ingest", str(tmp_path / "rb"), "--scope", "rb").returncode == 0

    for dry_run in (["--dry-run"], []):
        swapped = cli(stack, "ingest", str(tmp_path / "rb"), "--scope", "ra", "--sync", *dry_run)
        assert swapped.returncode == 1
        assert "already indexed in another scope" in swapped.stderr
        assert "sync refused: every page of the source is indexed in another scope" in (
            swapped.stderr
        )
        assert counts(swapped.stdout)["removed"] == 0
    assert _doc_ids(stack, "aardvark", "ra") == ["a.md"]


def test_a_page_emptied_in_place_is_removed_by_sync(stack: BackgroundStack, tmp_path: Path) -> None:
    """A page cut down to its front matter has nothing to index: skipped, as
    before, and its indexed version goes with --sync (it was kept, and its old
    text served on)."""
    site = tmp_path / "site"
    _page(site, "a.md", "# A\n\nThe alpha page about the aardvark.\n")
    _page(site, "b.md", "# B\n\nThe beta page about the bison.\n")
    assert cli(stack, "ingest", str(site), "--scope", "site").returncode == 0
    _page(site, "a.md", "---\ntitle: A\n---\n")

    plan = cli(stack, "ingest", str(site), "--scope", "site", "--sync", "--dry-run")
    synced = cli(stack, "ingest", str(site), "--scope", "site", "--sync")
    assert synced.returncode == 0, synced.stderr
    assert "skipped a.md: text: document 'a.md' has nothing to index" in synced.stderr
    assert counts(plan.stdout) == counts(synced.stdout)
    assert (counts(synced.stdout)["removed"], counts(synced.stdout)["unchanged"]) == (1, 1)
    assert "a.md" not in _doc_ids(stack, "aardvark alpha page", "site")
