"""Two documentation sites ingested as two scopes, as one does with Debian's
documentation packages: both hold `index.html`, and ids are unique across
scopes. Against a real Indexer and Retriever: without `--id-prefix` the
second site's home page is refused and the report says how to keep it; with
one, both home pages are indexed and found, each in its own scope."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.operator.test_cli import cli, counts
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

SITES = {
    "sqlite": "# SQLite\n\nSQLite is a small database engine that keeps a database in one file.\n",
    "jinja": "# Jinja\n\nJinja is a template engine: it renders HTML pages from templates.\n",
}


def test_two_sites_keep_both_home_pages_with_id_prefixes(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    for site, text in SITES.items():
        (tmp_path / site).mkdir()
        (tmp_path / site / "index.md").write_text(text)
    assert cli(stack, "ingest", str(tmp_path / "sqlite"), "--scope", "sqlite").returncode == 0

    clash = cli(stack, "ingest", str(tmp_path / "jinja"), "--scope", "jinja")
    assert clash.returncode == 1
    assert "rejected index.md: doc_id 'index.md' (locale 'en') is already indexed" in clash.stderr
    assert "hint: a page's id is its path in the folder" in clash.stderr
    assert "--id-prefix NAME/" in clash.stderr

    done = cli(
        stack, "ingest", str(tmp_path / "jinja"), "--scope", "jinja", "--id-prefix", "jinja/"
    )
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout)["added"] == 1
    assert "hint:" not in done.stderr
    for question, scope, doc_id in (
        ("which template engine renders HTML pages", "jinja", "jinja/index.md"),
        ("a database engine that keeps everything in one file", "sqlite", "index.md"),
    ):
        hit = stack.retrieve(question, top_k=1, disable_rerank=True).hits[0]
        assert (hit.doc_id, hit.scope_id) == (doc_id, scope)
        assert hit.url == "index.md"  # the url stays the page's path (with --base-url, its URL)
