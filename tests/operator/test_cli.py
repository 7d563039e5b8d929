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
