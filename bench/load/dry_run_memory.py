"""Resident memory of a real embedded stack after a burst of large dry-run
Upserts (issue 37): one warm-up, then ROUNDS rounds of PARALLEL dry-run
Upserts of six 1.99 M-character documents (12 MB each); prints the stack's
RSS before, during and up to 30 s after. Extra arguments are environment
variables for the stack, e.g. `PYTHONMALLOC=malloc` or `MALLOC_ARENA_MAX=2`.

    PYTHONPATH=. .venv/bin/python -m bench.load.dry_run_memory [NAME=VALUE ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from rag_client import ClientSettings, IndexerClient, RetryPolicy
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.runtime.healthcheck import wait_until_serving
from tests.support.stack import free_port

ROUNDS, PARALLEL, DOCUMENTS, CHARS = 3, 4, 6, 1_990_000
PARAGRAPH = "The quick brown fox jumps over the lazy dog near the river bank. " * 12 + "\n\n"


def rss_mib(process: psutil.Process) -> float:
    return float(process.memory_info().rss) / 2**20


def documents(tag: str) -> list[ipb.Document]:
    text = (PARAGRAPH * (CHARS // len(PARAGRAPH) + 1))[:CHARS]
    return [
        ipb.Document(doc_id=f"{tag}-{i}", scope_id="s", locale="en", text=text, title=f"T{i}")
        for i in range(DOCUMENTS)
    ]


def start_stack(data: Path, extra_env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    ports = {"RAG_INDEXER_PORT": str(free_port()), "RAG_RETRIEVER_PORT": str(free_port())}
    env = {**os.environ, **ports, **extra_env, "RAG_DATA_DIR": str(data)}
    env.update(RAG_RERANKER_ADDR="", RAG_METRICS_ENABLED="false", HF_HUB_OFFLINE="1")
    log = (data / "stack.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "services.stack"], env=env, stderr=log)
    return proc, f"127.0.0.1:{ports['RAG_INDEXER_PORT']}"


def burst(client: IndexerClient, process: psutil.Process) -> None:
    def upsert(tag: str) -> int:
        return int(client.upsert(documents(tag), dry_run=True, deadline=900).counts.added)

    upsert("warm-up")
    time.sleep(3)
    baseline = rss_mib(process)
    print(f"baseline {baseline:.0f} MiB", flush=True)
    with ThreadPoolExecutor(PARALLEL) as pool:
        for round_ in range(ROUNDS):
            list(pool.map(upsert, [f"r{round_}p{i}" for i in range(PARALLEL)]))
            print(f"round {round_}: {rss_mib(process):.0f} MiB", flush=True)
    waited = 0
    for after in (1, 5, 15, 30):
        time.sleep(after - waited)
        waited = after
        rss = rss_mib(process)
        print(f"after {after} s: {rss:.0f} MiB (+{rss - baseline:.0f})", flush=True)


def main(argv: list[str]) -> None:
    extra_env = dict(arg.split("=", 1) for arg in argv)
    proc, address = start_stack(Path(tempfile.mkdtemp()), extra_env)
    try:
        assert wait_until_serving(address, timeout_s=500), "the stack did not start"
        settings = ClientSettings(
            address,
            retry=RetryPolicy(max_attempts=1),  # a retried dry run would skew the rounds
            channel_options=(("grpc.max_send_message_length", 32 * 2**20),),
        )
        with IndexerClient(settings) as client:
            burst(client, psutil.Process(proc.pid))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main(sys.argv[1:])
