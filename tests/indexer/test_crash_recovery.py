"""SIGKILL an Indexer process in the middle of an ingest, re-run the ingest,
and compare both stores and the manifest with an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.storage.base import unrequested_deadline
from services.storage.embedded.manifest_sqlite import SqliteManifest
from services.storage.factory import open_manifest
from services.storage.settings import StoreMode, StoreSettings
from tests.stack.test_process import wait_serving
from tests.support.built_storage import open_built_stores
from tests.support.stack import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500), pytest.mark.long(seconds=23)]

DOCS = 80
BATCH = 4


def write_corpus(path: Path) -> Path:
    with path.open("w") as out:
        for i in range(DOCS):
            body = " ".join(
                f"Finding {i}.{j}: compound {i * 7 + j} alters pathway {j}." for j in range(8)
            )
            out.write(json.dumps({"_id": f"d{i:03d}", "title": f"Study {i}", "text": body}) + "\n")
    return path


class IndexerProcess:
    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        env = {
            **os.environ,
            "RAG_DATA_DIR": str(data_dir),
            "RAG_INDEXER_PORT": str(self.port),
            "RAG_LOG_JSON": "false",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.indexer"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # A hang guard (120 s was passed on a loaded 2-core machine).
        assert wait_serving(self.port, 600), "indexer did not start"

    def ingest(self, corpus: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.operator.cli",
                "--addr",
                f"127.0.0.1:{self.port}",
                "ingest",
                str(corpus),
                "--scope",
                "s",
                "--format",
                "beir",
                "--batch",
                str(BATCH),
                "--quiet",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def manifest_rows(self) -> int:
        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            stats = indexer_pb2_grpc.IndexerStub(channel).Stats(ipb.StatsRequest(), timeout=5)
        return int(stats.manifest_rows)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)


def run_clean(data_dir: Path, corpus: Path) -> None:
    indexer = IndexerProcess(data_dir)
    try:
        assert indexer.ingest(corpus).wait(timeout=600) == 0
    finally:
        indexer.stop()


def run_with_crash(data_dir: Path, corpus: Path) -> int:
    indexer = IndexerProcess(data_dir)
    cli = indexer.ingest(corpus)
    committed = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and cli.poll() is None:
        committed = indexer.manifest_rows()
        if committed >= 2 * BATCH:
            break
        time.sleep(0.05)
    indexer.stop(signal.SIGKILL)
    cli.wait(timeout=60)
    assert 0 < committed < DOCS, "the kill must land mid-ingest"
    rerun = IndexerProcess(data_dir)
    try:
        assert rerun.ingest(corpus).wait(timeout=600) == 0
    finally:
        rerun.stop()
    return committed


def snapshot(data_dir: Path) -> dict[str, object]:
    settings = StoreSettings(data_dir=data_dir, store_mode=StoreMode.EMBEDDED)
    manifest = open_manifest(settings)
    assert isinstance(manifest, SqliteManifest)
    keys = [(f"d{i:03d}", "en") for i in range(DOCS)]
    entries = manifest.get_many(keys, deadline=unrequested_deadline())
    pending = manifest.open_intents(deadline=unrequested_deadline())
    manifest.close()
    ids = sorted(cid for e in entries.values() for cid in e.chunk_ids)
    vectors, lexical = open_built_stores(settings, 384)
    try:
        return {
            "manifest": {k: e.chunk_ids for k, e in sorted(entries.items())},
            "pending": pending,
            "vector_count": vectors.count(None, unrequested_deadline()),
            "lexical_count": lexical.count(None, unrequested_deadline()),
            "vector_ids": sorted(
                c.chunk_id for c in vectors.get(ids, deadline=unrequested_deadline())
            ),
            "lexical_ids": sorted(
                c.chunk_id for c in lexical.get(ids, deadline=unrequested_deadline())
            ),
            "ids": ids,
        }
    finally:
        vectors.close()
        lexical.close()


def test_killed_ingest_converges_to_a_clean_run(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    run_clean(tmp_path / "clean", corpus)
    run_with_crash(tmp_path / "crashed", corpus)
    clean, crashed = snapshot(tmp_path / "clean"), snapshot(tmp_path / "crashed")
    assert len(clean["manifest"]) == DOCS  # type: ignore[arg-type]
    assert crashed == clean
    assert clean["pending"] == []
    assert clean["vector_count"] == clean["lexical_count"] == len(clean["ids"])  # type: ignore[arg-type]
    assert clean["vector_ids"] == clean["lexical_ids"] == clean["ids"]
