"""An ingest always finishes: a document over its work budget is rejected by
name while the rest commits, the page that once hung the chunker is indexed,
and a stopping stack never waits on a run past its grace period.

- the real stack in process, the real model: budget, repro page, verify;
- `python -m services.stack` as an operator starts it, SIGTERM in the middle
  of a long run: the process exits, the next start recovers, verify is clean;
- a run that never looks at its deadline (a fault injected into the
  embedder, labelled below): stop() returns after the grace period anyway.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.embedding.embedder import Embedder
from services.runtime.healthcheck import wait_until_serving
from tests.stack.support import start_stack
from tests.support.stack import BackgroundStack, free_port

pytestmark = pytest.mark.integration


def _page(doc_id: str, text: str) -> ipb.Document:
    return ipb.Document(
        doc_id=doc_id,
        url=f"https://docs.example.com/{doc_id}",
        title=doc_id.replace("-", " "),
        scope_id="site",
        locale="en",
        text=text,
        content_type=ipb.CONTENT_TYPE_MARKDOWN,
    )


def _page_ending_with_a_long_fence() -> str:
    """The issue's reproduction: struct-v1 never returned on it."""
    lines = "\n".join(f"console.log('line {i:03d} of the example');" for i in range(20))
    fence = "```js\n" + lines + "\n```\n"
    return "# Example\n\n" + "A sentence of prose here. " * 30 + "\n\n" + fence


def _long_page(words: int) -> str:
    return " ".join(f"Sentence {i} of a very long reference page." for i in range(words))


def _verify_clean(stub: indexer_pb2_grpc.IndexerStub) -> ipb.VerifyReport:
    *_, last = stub.Verify(ipb.VerifyRequest(), timeout=120)
    return last.report


def test_a_document_over_its_budget_is_rejected_and_the_rest_commits(
    tmp_path: Path, embedder: Embedder
) -> None:
    stack = BackgroundStack(tmp_path, embedder, indexer={"max_chunking_steps": 20}).start()
    try:
        docs = [
            _page("ends-with-code", _page_ending_with_a_long_fence()),
            _page("huge-reference", _long_page(2000)),  # ~130 chunks: over 20
            _page("ports", "# Ports\n\nThe Indexer listens on port 50051 by default."),
        ]
        reply = stack.indexer.Upsert(ipb.UpsertRequest(documents=docs), timeout=120)
        states = {o.doc_id: o for o in reply.outcomes}
        assert states["huge-reference"].state == ipb.DOCUMENT_STATE_REJECTED
        assert "'huge-reference'" in states["huge-reference"].error
        assert "RAG_MAX_CHUNKING_STEPS" in states["huge-reference"].error
        assert states["ends-with-code"].state == ipb.DOCUMENT_STATE_ADDED
        assert states["ports"].state == ipb.DOCUMENT_STATE_ADDED
        hits = stack.retrieve("console.log line 019 of the example", top_k=3).hits
        assert hits[0].doc_id == "ends-with-code"
        assert _verify_clean(stack.indexer).clean
    finally:
        stack.stop()


def test_sigterm_during_a_long_run_stops_the_stack_and_the_next_start_recovers(
    tmp_path: Path,
) -> None:
    grace_s = 2
    ports = {"RAG_INDEXER_PORT": free_port(), "RAG_RETRIEVER_PORT": free_port()}
    env = {
        **os.environ,
        **{k: str(v) for k, v in ports.items()},
        "RAG_DATA_DIR": str(tmp_path),
        "RAG_RERANKER_ADDR": "",
        "RAG_SHUTDOWN_GRACE_S": str(grace_s),
    }
    addr = f"127.0.0.1:{ports['RAG_INDEXER_PORT']}"
    proc = _start_stack(env, addr)
    docs = [_page(f"page-{i}", _long_page(120)) for i in range(150)]
    with grpc.insecure_channel(addr) as channel, ThreadPoolExecutor(1) as pool:
        stub = indexer_pb2_grpc.IndexerStub(channel)
        run: Future[Any] = pool.submit(stub.Upsert, ipb.UpsertRequest(documents=docs), timeout=600)
        log: list[bytes] = []
        _wait_until_writing(proc, run, log)
        proc.send_signal(signal.SIGTERM)
        # Bounded by grace + the time to notice: a hang fails here, not later.
        assert proc.wait(timeout=grace_s + 60) == 0, b"".join(log[-30:]).decode()
        with pytest.raises(grpc.RpcError):
            run.result(timeout=30)
    proc = _start_stack(env, addr)
    try:
        with grpc.insecure_channel(addr) as channel:
            stub = indexer_pb2_grpc.IndexerStub(channel)
            report = _verify_clean(stub)
            assert report.clean and report.documents == 0  # the run was undone
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def _start_stack(env: dict[str, str], addr: str) -> subprocess.Popen[bytes]:
    proc = start_stack(env)
    if not wait_until_serving(addr, timeout_s=120):
        proc.kill()
        raise AssertionError("the stack did not start")
    return proc


def _wait_until_writing(proc: subprocess.Popen[bytes], run: Future[Any], log: list[bytes]) -> None:
    """Wait for the stack's log to say the run is past planning, so SIGTERM
    lands in the middle of its writes; the log is drained in a thread from
    then on (a full pipe would stall the process)."""
    assert proc.stdout is not None
    writing = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line)
            if b"index_run_writing" in line:
                writing.set()

    threading.Thread(target=drain, daemon=True).start()
    assert writing.wait(300), "the run never started writing"
    assert not run.done(), f"the run ended before the signal: {run.result()}"


class _EmbedderThatNeverReturns:
    """FAULT INJECTION (test-only): embedding blocks until released and never
    looks at the run's deadline, like a hung library call would."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.release = threading.Event()
        self.entered = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_documents(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        self.release.wait(600)
        return self.inner.embed_documents(*args, **kwargs)


def test_stop_does_not_wait_on_a_run_past_the_grace_period(
    tmp_path: Path, embedder: Embedder
) -> None:
    hung = _EmbedderThatNeverReturns(embedder)
    stack = BackgroundStack(
        tmp_path,
        hung,  # type: ignore[arg-type]
        indexer={"shutdown_grace_s": 1.0},
        retriever={"shutdown_grace_s": 1.0},
    ).start()
    with ThreadPoolExecutor(1) as pool:
        upsert = pool.submit(stack.upsert, [_page("stuck", _long_page(50))])
        assert hung.entered.wait(60)
        indexer_app = stack.stack.indexer if stack.stack else None
        stack.stop()  # BackgroundLoop.run bounds it (120 s): a hang fails the test
        assert indexer_app is not None and indexer_app.abandoned_work
        hung.release.set()
        with pytest.raises(grpc.RpcError):
            upsert.result(timeout=60)
