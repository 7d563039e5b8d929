"""The operator CLI against a real Indexer: dry run, ingest, sync, delete, stats."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.corpus import CORPUS_DIR
from tests.support.release_check import run_cli
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


def cli(stack: BackgroundStack, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(stack.indexer_addr, *args)


def counts(output: str) -> dict[str, int]:
    line = next(x for x in output.splitlines() if x.startswith(("done:", "plan (dry run):")))
    pairs = line.split(":", 1)[1].split(",")
    return {k.strip(): int(v) for k, v in (p.split("=") for p in pairs)}


def test_ingest_dry_run_sync_delete_and_stats(stack: BackgroundStack, tmp_path: Path) -> None:
    source = tmp_path / "site"
    shutil.copytree(CORPUS_DIR, source)
    (source / "notes.txt").write_text("Plain text notes about snapshots.\n")
    (source / "bad.md").write_bytes(b"\xff\xfe\x00\xd8broken")
    n_docs = len(list(CORPUS_DIR.glob("*.md"))) + 1

    plan = cli(stack, "ingest", str(source), "--scope", "site", "--dry-run")
    assert counts(plan.stdout)["added"] == n_docs
    assert "bad.md" in plan.stderr and plan.returncode == 1  # reported, the rest goes on
    done = cli(stack, "ingest", str(source), "--scope", "site")
    assert counts(done.stdout) == counts(plan.stdout)
    assert "documents" in done.stderr  # the progress bar

    (source / "billing.md").unlink()
    (source / "bad.md").unlink()
    synced = cli(stack, "ingest", str(source), "--scope", "site", "--sync")
    assert synced.returncode == 0, synced.stderr
    assert counts(synced.stdout)["removed"] == 1
    assert counts(synced.stdout)["unchanged"] == n_docs - 1

    deleted = cli(stack, "delete", "notes.txt")
    assert deleted.returncode == 0 and "DOCUMENT_STATE_REMOVED" in deleted.stdout
    stats = json.loads(cli(stack, "stats").stdout)
    assert int(stats["documents"]) == n_docs - 2
    assert int(stats["vectors"]) == int(stats["lexical_rows"]) == int(stats["chunks"])
    assert stats["chunking"]["target_chars"] == 800
    assert stats["chunking"]["overlap_chars"] == 200
    assert int(stats["last_run"]["removed"]) == 1
    missing = cli(stack, "delete", "notes.txt")  # no longer indexed: a failure, said
    assert missing.returncode == 1
    assert "notes.txt: NOT_FOUND" in missing.stderr


def test_a_sync_from_a_source_with_no_page_is_refused_unless_asked_for(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    """An empty mount or a wrong folder (or one holding only empty pages)
    once removed every page of the scope and said "done" (probe)."""
    source, empty = tmp_path / "site", tmp_path / "empty"
    source.mkdir()
    empty.mkdir()
    (source / "a.md").write_text("# A\n\nSnapshots are taken hourly.\n")
    (source / "b.md").write_text("# B\n\nRestores take ten minutes.\n")
    assert cli(stack, "ingest", str(source), "--scope", "mount").returncode == 0
    (empty / "stub.md").write_text("---\ntitle: Section\n---\n")  # nothing to index
    refused = cli(stack, "ingest", str(empty), "--scope", "mount", "--sync")
    assert refused.returncode == 1
    assert "sync refused: the source holds no page with anything to index" in refused.stderr
    assert counts(refused.stdout)["removed"] == 0
    emptied = cli(stack, "ingest", str(empty), "--scope", "mount", "--sync", "--allow-empty-sync")
    assert emptied.returncode == 0, emptied.stderr
    assert counts(emptied.stdout)["removed"] == 2


def test_sync_after_a_read_error_removes_nothing(stack: BackgroundStack, tmp_path: Path) -> None:
    """A page indexed before and unreadable now (an editor's half-written
    save) is not taken for a page that is gone: the Sync step is skipped, as
    rsync skips deletion after an I/O error, and says so."""
    source = tmp_path / "site"
    source.mkdir()
    (source / "a.md").write_text("# A\n\nSnapshots are taken hourly.\n")
    (source / "b.md").write_text("# B\n\nRestores take ten minutes.\n")
    assert cli(stack, "ingest", str(source), "--scope", "site").returncode == 0
    (source / "b.md").write_bytes("# B\n\nRestores take ten minutes \u2014".encode()[:-1])

    synced = cli(stack, "ingest", str(source), "--scope", "site", "--sync")
    assert synced.returncode == 1
    assert "b.md: cannot decode" in synced.stderr
    assert "sync skipped: 1 source(s) could not be read (b.md)" in synced.stderr
    assert counts(synced.stdout)["removed"] == 0
    assert int(json.loads(cli(stack, "stats").stdout)["documents"]) == 2

    (source / "b.md").unlink()  # gone now, and nothing unreadable: the Sync runs,
    (source / "linked.md").symlink_to(source / "a.md")  # a link skipped by rule or not
    synced = cli(stack, "ingest", str(source), "--scope", "site", "--sync")
    assert "linked.md: symbolic link, skipped" in synced.stderr
    assert "sync skipped" not in synced.stderr
    assert counts(synced.stdout)["removed"] == 1


def test_pages_with_nothing_to_index_are_skipped_not_failures(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    """A static site's section page holds front matter only: the Indexer
    refuses it (EMPTY_DOCUMENT), and the load says so without failing."""
    source = tmp_path / "hugo"
    (source / "guide").mkdir(parents=True)
    (source / "guide" / "_index.md").write_text("---\ntitle: Guide\nweight: 10\n---\n")
    (source / "guide" / "install.md").write_text("# Install\n\nRun the installer.\n")
    done = cli(stack, "ingest", str(source), "--scope", "hugo")
    assert done.returncode == 0, done.stderr
    assert (counts(done.stdout)["added"], counts(done.stdout)["rejected"]) == (1, 0)
    assert counts(done.stdout)["skipped"] == 1
    assert "skipped guide/_index.md: text: document 'guide/_index.md' has nothing to index" in (
        done.stderr
    )


def test_files_the_indexer_could_not_take_are_rejected_one_by_one(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    """Each is reported with its reason and the rest of the folder is indexed:
    a charset no browser decodes, a lone surrogate from a front-matter escape,
    a body over the document limit (sent, it would exceed the message limit
    and fail its whole batch)."""
    source = tmp_path / "site"
    source.mkdir()
    (source / "good.md").write_text("# Good\n\nSnapshots are taken hourly.\n")
    for charset in ("undefined", "punycode", "rot13"):
        page = f'<html><head><meta charset="{charset}"></head><body><p>x</p></body></html>'
        (source / f"{charset}.html").write_text(page)
    (source / "surrogate.md").write_text('---\ntitle: "Bad \\ud800"\n---\n\n# T\n\nBody.\n')
    (source / "huge.md").write_text("# Huge\n\n" + "word " * 1000)

    done = cli(stack, "ingest", str(source), "--scope", "site", "--max-document-chars", "4000")
    assert done.returncode == 1
    # The summary counts every page not indexed, refused here or by the Indexer.
    assert counts(done.stdout)["added"] == 1 and counts(done.stdout)["rejected"] == 5
    for charset in ("undefined", "punycode", "rot13"):
        assert f"{charset}.html: unknown declared charset" in done.stderr
    assert "surrogate.md: title: holds a lone surrogate (U+D800), not text" in done.stderr
    assert "huge.md: text: 5008 characters, limit is 4000 (--max-document-chars)" in done.stderr


def test_a_page_in_two_renderings_is_indexed_once_and_found_once(
    stack: BackgroundStack, tmp_path: Path
) -> None:
    """As documentation packages ship pages: Sphinx's reST sources beside its
    HTML, Markdown beside the HTML generated from it. Each page is indexed
    once (Markdown, else HTML), so its copies no longer take two of the first
    places; `--all-renderings` indexes every file, and a sync without it takes
    the copies out again."""
    source = tmp_path / "pkg"
    cache = (
        "Remember the results of an expensive function so that repeated calls with the same "
        "arguments return at once; the cache keeps at most maxsize entries."
    )
    ci = "Install exactly the versions in the lock file on a build server, from a clean slate."
    pages = {
        "html/library/functools.html": _html_page("functools", cache),
        "html/_sources/library/functools.rst.txt": f"functools\n=========\n\n{cache}\n",
        "docs/output/commands/npm-ci.html": _html_page("npm-ci", ci),
        "docs/content/commands/npm-ci.md": f"# npm-ci\n\n{ci}\n",
        "docs/content/commands/npm-link.md": "# npm-link\n\nSymlink a package folder.\n",
    }
    for relpath, text in pages.items():
        (source / relpath).parent.mkdir(parents=True, exist_ok=True)
        (source / relpath).write_text(text)

    done = cli(stack, "ingest", str(source), "--scope", "pkg", "--sync")
    assert done.returncode == 0, done.stderr
    assert (counts(done.stdout)["added"], counts(done.stdout)["skipped"]) == (3, 2)
    assert (
        "skipped html/_sources/library/functools.rst.txt: the same page as "
        "html/library/functools.html, which is indexed in its place" in done.stderr
    )
    for question, page in (
        ("keep what a slow function returned for the same inputs", "html/library/functools.html"),
        ("install from the lock file on a build server", "docs/content/commands/npm-ci.md"),
    ):
        hits = stack.retrieve(question, top_k=5, disable_rerank=True).hits
        assert hits[0].doc_id == page  # first, and its other rendering nowhere
        assert [h.doc_id for h in hits].count(page) == 1 and len(hits) == 3

    every = cli(stack, "ingest", str(source), "--scope", "pkg", "--sync", "--all-renderings")
    assert (counts(every.stdout)["added"], counts(every.stdout)["skipped"]) == (2, 0)
    again = cli(stack, "ingest", str(source), "--scope", "pkg", "--sync")
    assert (counts(again.stdout)["removed"], counts(again.stdout)["skipped"]) == (2, 2)
    assert int(json.loads(cli(stack, "stats").stdout)["documents"]) == 3


def _html_page(title: str, text: str) -> str:
    return f"<html><body><h1>{title}</h1><p>{text}</p></body></html>"
