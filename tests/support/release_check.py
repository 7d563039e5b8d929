"""Helpers for tests of `rag-indexer release-check`: the operator CLI run as a
subprocess against a BackgroundStack, a copy of the test corpus as the
source, and golden queries the corpus answers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.corpus import CORPUS_DIR
from tests.support.stack import BackgroundStack

BASE_URL = "https://docs.example/"

# Queries the test corpus answers under any scope, one per kind of check.
GOLDEN: list[dict[str, object]] = [
    {
        "id": "status-429",
        "query": "What does status 429 with Retry-After mean?",
        "expected_doc_ids": ["rate-limits.md"],
        "must_contain": "Retry-After",
    },
    {"id": "restore", "query": "restore from snapshots", "expected_doc_ids": ["backups.md"]},
    {"id": "export-code", "query": "X7Q-4291", "expected_doc_ids": ["billing.md"], "top_k": 3},
    {
        "id": "this-page",
        "query": "summarize this page",
        "page_url": BASE_URL + "billing.md",
        "expected_intent": "current_page",
        "expected_page_status": "indexed",
        "expected_doc_ids": ["billing.md"],
    },
    {
        "id": "missing-page",
        "query": "summarize this page",
        "page_url": BASE_URL + "missing.md",
        "expected_intent": "current_page",
        "expected_page_status": "not_indexed",
    },
]


def copy_corpus(target: Path) -> Path:
    shutil.copytree(CORPUS_DIR, target)
    return target


def write_golden(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def run_cli(
    indexer_addr: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.operator.cli", "--addr", indexer_addr, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


def ingest(stack: BackgroundStack, source: Path, scope: str) -> None:
    """Without --sync: its (empty) Sync would be the run Stats reports as last."""
    done = run_cli(
        stack.indexer_addr,
        "ingest",
        str(source),
        "--scope",
        scope,
        "--base-url",
        BASE_URL,
        "--quiet",
    )
    assert done.returncode == 0, done.stderr


def release_check(
    stack: BackgroundStack,
    source: Path,
    scope: str,
    golden: Path,
    out: Path,
    env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        stack.indexer_addr,
        "release-check",
        str(source),
        "--scope",
        scope,
        "--base-url",
        BASE_URL,
        "--golden",
        str(golden),
        "--out",
        str(out),
        "--retriever-addr",
        stack.retriever_addr,
        *extra,
        env=env,
    )
