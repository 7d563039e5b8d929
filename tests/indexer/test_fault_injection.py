"""Kill the Indexer at every write step of a run, then restart it without
resending anything: nothing the run wrote is ever served, `verify` finds a
clean index, and the counts equal a clean run's of the committed documents.

The kill is a real SIGKILL of the real stack process (tests.support.kill_at
wraps one store method to pull the trigger; nothing else is faked)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.settings import StoreMode, StoreSettings
from services.storage.visibility import committed_generation
from tests.stack.test_process import wait_serving
from tests.support.built_storage import open_built_storage
from tests.support.stack import free_port

# A hang guard per test, not a bound: the first one's setup builds the base
# index and runs the faulty stack (257 s in CI on a loaded 2-core machine),
# then its call restarts the stack; pytest's default of 300 s ran out.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900), pytest.mark.long(seconds=58)]

ROOT = Path(__file__).resolve().parents[2]


def page(doc_id: str, body: str, title: str = "") -> ipb.Document:
    return ipb.Document(
        doc_id=doc_id,
        title=title or doc_id.title(),
        url=f"https://docs.test/{doc_id}",
        scope_id="site",
        locale="en",
        text=f"# {doc_id.title()}\n\n{body}\n",  # a new title alone is metadata-only
    )


BASE = [
    page("kept", "The kept page explains zanzibarquartz filters in detail."),
    page("changing", "The old wording mentions ottomanfennel only."),
    page("retitled", "Metadata lives here with wolframpeony notes."),
    page("doomed", "The doomed page describes glacierpuffin options."),
    page("other", "Another page about harbourlantern settings and ports."),
]

# What each faulty run sends; the step it dies in belongs to that run.
CHANGE_RUN = [
    page("fresh", "A brand new page about nebulacrocus tuning."),
    page("changing", "The new wording mentions saffronkestrel instead."),
]
RETITLE_RUN = [
    page("retitled", "Metadata lives here with wolframpeony notes.", title="Renamed Title")
]


class StackProcess:
    """The real embedded stack (Indexer + Retriever) in its own process."""

    def __init__(
        self, data_dir: Path, kill_at: str = "", stores: dict[str, str] | None = None
    ) -> None:
        """`stores`: the store settings (environment) when not embedded."""
        self.indexer_port, self.retriever_port = free_port(), free_port()
        env = {
            **os.environ,
            **(stores or {}),
            "RAG_DATA_DIR": str(data_dir),
            "RAG_INDEXER_PORT": str(self.indexer_port),
            "RAG_RETRIEVER_PORT": str(self.retriever_port),
            "RAG_RERANKER_ADDR": "",
            "RAG_LOG_JSON": "false",
            "HF_HUB_OFFLINE": "1",
        }
        module = ["-m", "tests.support.kill_at", kill_at] if kill_at else ["-m", "services.stack"]
        self.proc = subprocess.Popen(
            [sys.executable, *module], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
        )
        assert wait_serving(self.indexer_port, 180), "stack did not start"
        assert wait_serving(self.retriever_port, 60), "retriever did not start"
        self.channels = [
            grpc.insecure_channel(f"127.0.0.1:{p}")
            for p in (self.indexer_port, self.retriever_port)
        ]
        self.indexer = indexer_pb2_grpc.IndexerStub(self.channels[0])
        self.retriever = retriever_pb2_grpc.RetrieverStub(self.channels[1])

    def upsert(self, docs: list[ipb.Document]) -> None:
        self.indexer.Upsert(ipb.UpsertRequest(documents=docs), timeout=120)

    def doc_ids_for(self, query: str) -> list[str]:
        request = rpb.RetrieveRequest(query=query, top_k=10, disable_rerank=True)
        return [hit.doc_id for hit in self.retriever.Retrieve(request, timeout=30).hits]

    def texts_for(self, query: str) -> list[str]:
        request = rpb.RetrieveRequest(query=query, top_k=10, disable_rerank=True)
        return [hit.text for hit in self.retriever.Retrieve(request, timeout=30).hits]

    def verify(self, repair: bool = False) -> ipb.VerifyReport:
        stream = self.indexer.Verify(ipb.VerifyRequest(repair=repair), timeout=120)
        return next(m.report for m in stream if m.HasField("report"))

    def counts(self) -> tuple[int, ...]:
        s = self.indexer.Stats(ipb.StatsRequest(), timeout=30)
        return (s.documents, s.chunks, s.vectors, s.lexical_rows, s.pending_documents)

    def stop(self) -> None:
        for channel in self.channels:
            channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def base_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int, ...]]:
    """A data folder holding the base corpus, written by a clean run and the
    stack stopped gracefully, and that run's counts: each step's test starts
    from a copy (one start fewer per step on a machine where a start is slow)."""
    data_dir = tmp_path_factory.mktemp("base")
    stack = StackProcess(data_dir)
    try:
        stack.upsert(BASE)
        return data_dir, stack.counts()
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def clean_counts(base_index: tuple[Path, tuple[int, ...]]) -> tuple[int, ...]:
    return base_index[1]


def run_faulty(stack: StackProcess, step: str) -> None:
    """Send the run whose `step` kills the process; the call dies with it."""
    with pytest.raises(grpc.RpcError):
        if step == "payload":
            stack.upsert(RETITLE_RUN)
        elif step == "delete":
            stack.indexer.Delete(ipb.DeleteRequest(doc_ids=["doomed"]), timeout=120)
        else:
            stack.upsert(CHANGE_RUN)
    assert stack.proc.wait(timeout=60) == -9, "the process must have been SIGKILLed"


def uncommitted_rows_visible(data_dir: Path) -> list[str]:
    """Between the crash and the restart: what a search limited to committed
    rows (what the Retriever runs) returns of the faulty run's words."""
    settings = StoreSettings(data_dir=data_dir, store_mode=StoreMode.EMBEDDED)
    storage = open_built_storage(settings, 384)
    try:
        scope = ScopeFilter(
            visible_generation=committed_generation(storage.manifest, unrequested_deadline())
        )
        found = []
        for word in ("nebulacrocus", "saffronkestrel", "renamed"):
            found += [
                h.chunk.doc_id
                for h in storage.lexical.search(word, 10, scope, deadline=unrequested_deadline())
            ]
        return found
    finally:
        storage.close()


@pytest.fixture
def crashed(
    tmp_path: Path, request: pytest.FixtureRequest, base_index: tuple[Path, tuple[int, ...]]
) -> Iterator[tuple[Path, str]]:
    step = request.param
    data_dir = tmp_path / "data"
    shutil.copytree(base_index[0], data_dir)
    faulty = StackProcess(data_dir, kill_at=step)
    try:
        run_faulty(faulty, step)
    finally:
        faulty.stop()  # reaps it; stops it too if the step was never reached
    yield data_dir, step


STEPS = ["vector_write", "lexical_write", "payload", "delete", "commit"]


@pytest.mark.parametrize("crashed", STEPS, indirect=True)
def test_a_run_killed_at_any_write_step_is_undone_without_its_input(
    crashed: tuple[Path, str], clean_counts: tuple[int, ...]
) -> None:
    data_dir, _ = crashed
    assert uncommitted_rows_visible(data_dir) == []
    stack = StackProcess(data_dir)  # recovery runs before the ports open
    try:
        assert_only_committed_data(stack, clean_counts)
    finally:
        stack.stop()


def assert_only_committed_data(stack: StackProcess, clean_counts: tuple[int, ...]) -> None:
    """After a restart: answers, verify and counts as if the killed run never
    happened (the base corpus alone)."""
    # Hybrid: the vector channel returns neighbours for any query, so the
    # check is that none of them is a row of the killed run.
    assert "fresh" not in stack.doc_ids_for("nebulacrocus tuning")
    assert "saffronkestrel" not in " ".join(stack.texts_for("saffronkestrel wording"))
    assert stack.doc_ids_for("ottomanfennel")[:1] == ["changing"]
    assert stack.doc_ids_for("glacierpuffin")[:1] == ["doomed"]
    retitled = stack.retriever.Retrieve(
        rpb.RetrieveRequest(query="wolframpeony", top_k=1, disable_rerank=True), timeout=30
    ).hits[0]
    assert (retitled.doc_id, retitled.title) == ("retitled", "Retitled")
    report = stack.verify()
    assert report.clean, [str(f) for f in report.findings]
    assert report.findings_total == 0
    assert stack.counts() == clean_counts
