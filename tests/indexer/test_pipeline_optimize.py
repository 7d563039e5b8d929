"""After every real indexing run the embedded vector store may build its
search index; a dry run never touches it, and a failure there does not fail
the run (the data is committed by then)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.core.errors import StoreError
from services.core.models import ContentType, Document
from services.embedding.embedder import Embedder
from services.indexer.app import build_indexing_pipeline
from services.indexer.pipeline import IndexingPipeline
from services.indexer.servicer import IndexerServicer
from services.indexer.settings import IndexerSettings
from services.storage.base import unrequested_deadline
from services.storage.factory import open_manifest, open_stores
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


class OptimizeSpy:
    """The real vector store, counting (or failing) its optimize() calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.settles: list[bool] = []
        self.failure: Exception | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def optimize(self, *, settle: bool = True) -> bool:
        self.calls += 1
        self.settles.append(settle)
        if self.failure is not None:
            raise self.failure
        return bool(self.inner.optimize(settle=settle))


@pytest.fixture
def spied(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[IndexingPipeline, OptimizeSpy]]:
    stores = StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED)
    vectors, lexical = open_stores(stores, embedder.dim)
    manifest = open_manifest(stores)
    spy = OptimizeSpy(vectors)
    settings = IndexerSettings(vector_settle_after_s=0)
    pipeline = build_indexing_pipeline(settings, embedder, Storage(spy, lexical, manifest))  # type: ignore[arg-type]
    yield pipeline, spy
    vectors.close()
    lexical.close()
    manifest.close()


def doc(doc_id: str, text: str) -> Document:
    return Document(
        doc_id=doc_id,
        text=text,
        url=f"https://x.test/{doc_id}",
        title=doc_id,
        scope_id="site",
        content_type=ContentType.MARKDOWN,
    )


def test_real_runs_optimize_and_dry_runs_do_not(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    pipeline, spy = spied
    pipeline.upsert([doc("a", "# A\n\nAlpha body.")], dry_run=True)
    assert spy.calls == 0
    pipeline.upsert([doc("a", "# A\n\nAlpha body.")])
    assert spy.calls == 1
    pipeline.upsert([doc("a", "# A\n\nAlpha body.")])  # unchanged: an older index may be due
    assert spy.calls == 2


def test_a_failing_optimize_does_not_fail_the_run(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    pipeline, spy = spied
    spy.failure = StoreError("qdrant-edge: optimize: disk full")
    report = pipeline.upsert([doc("b", "# B\n\nBeta body.")])
    assert report.counts.added == 1 and spy.calls == 1
    assert pipeline.manifest.count(deadline=unrequested_deadline()) == 1


def test_runs_that_defer_builds_ask_without_settling_and_the_settle_asks_with(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    pipeline, spy = spied
    pipeline.upsert([doc("c", "# C\n\nGamma body.")])
    assert spy.settles == [True]  # RAG_VECTOR_SETTLE_AFTER_S=0: every run builds
    pipeline.defer_vector_builds = True
    pipeline.upsert([doc("d", "# D\n\nDelta body.")])
    assert spy.settles == [True, False]
    pipeline.settle_vectors()
    assert spy.settles == [True, False, True]


class _Caller:
    """Stands in for a gRPC call context (fake): no deadline, never cancelled."""

    def time_remaining(self) -> None:
        return None

    def add_done_callback(self, callback: Any) -> None:
        pass


def _deferring(pipeline: IndexingPipeline, settle_after_s: float) -> IndexerServicer:
    pipeline.defer_vector_builds = True
    return IndexerServicer(pipeline, settle_after_s=settle_after_s)


async def _settles_seen(spy: OptimizeSpy, count: int) -> list[bool]:
    """The spy's settle flags once it saw `count` asks (or after 5 s)."""
    for _ in range(100):
        if len(spy.settles) >= count:
            break
        await asyncio.sleep(0.05)
    return spy.settles


async def test_the_servicer_settles_the_deferred_build_once_runs_stop(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    pipeline, spy = spied
    servicer = _deferring(pipeline, settle_after_s=0.2)
    for name in ("e", "f"):  # a load: one run right after the other
        await servicer._run(_Caller(), pipeline.upsert, [doc(name, f"# {name}\n\nBody.")])  # type: ignore[arg-type]
    assert spy.settles == [False, False]  # no settle between the two runs
    assert await _settles_seen(spy, 3) == [False, False, True]
    assert await servicer.settle(5.0)  # stopping: nothing left running or due
    assert spy.settles == [False, False, True]


def test_an_indexer_settles_at_start_and_after_a_load_through_the_real_server(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A stop soon after a load leaves its deferred build to the next start."""
    spies: list[OptimizeSpy] = []

    def spy_on(vectors: Any, lexical: Any) -> tuple[Any, Any]:
        spies.append(OptimizeSpy(vectors))
        return spies[0], lexical

    stack = BackgroundStack(
        tmp_path, embedder, indexer={"vector_settle_after_s": 0.2}, wrap_stores=spy_on
    ).start()
    try:
        _wait_for(lambda: spies[0].settles == [True])  # no run yet: the start's settle
        stack.upsert([ipb.Document(doc_id="g", text="# G\n\nBody.", scope_id="site")])
        _wait_for(lambda: spies[0].settles == [True, False, True])
    finally:
        stack.stop()


def _wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    ends = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < ends, "the settle never came"
        time.sleep(0.05)


async def test_a_settle_that_finds_the_lock_held_tries_again_later(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    pipeline, spy = spied
    servicer = _deferring(pipeline, settle_after_s=0.1)
    async with servicer._write_lock:  # a verify, say
        await servicer._settle_vectors()
        assert spy.settles == []
    assert await _settles_seen(spy, 1) == [True]  # the retry, once the lock is free
    assert await servicer.settle(5.0)


async def test_a_run_replies_before_the_build_it_leaves_and_the_next_run_waits_for_it(
    spied: tuple[IndexingPipeline, OptimizeSpy],
) -> None:
    """The Indexer's pipeline builds after the reply (build_in_run=False): a
    build can take minutes, and a caller whose deadline passed, or whose
    Indexer was killed, meanwhile took a committed run for a failed one."""
    pipeline, spy = spied
    pipeline.build_in_run = False
    servicer = IndexerServicer(pipeline)
    building, release = threading.Event(), threading.Event()
    real_optimize = spy.optimize

    def slow_optimize(*, settle: bool = True) -> bool:  # fake: a long build
        building.set()
        release.wait(10)
        return real_optimize(settle=settle)

    spy.optimize = slow_optimize  # type: ignore[method-assign]
    report = await servicer._run(_Caller(), pipeline.upsert, [doc("h", "# H\n\nBody.")])  # type: ignore[arg-type]
    assert report.counts.added == 1 and spy.calls == 0  # replied: nothing built yet
    assert await asyncio.to_thread(building.wait, 5)  # the build follows, under the lock
    second = asyncio.ensure_future(
        servicer._run(_Caller(), pipeline.upsert, [doc("i", "# I\n\nBody.")])  # type: ignore[arg-type]
    )
    await asyncio.sleep(0.3)
    assert not second.done()  # the next run waits for the build
    release.set()
    assert (await second).counts.added == 1
    assert await _settles_seen(spy, 2) == [True, True]  # after each run, not inside it
    dry = await servicer._run(_Caller(), pipeline.upsert, [doc("j", "# J\n\nBody.")], dry_run=True)  # type: ignore[arg-type]
    assert dry.dry_run and await servicer.settle(5.0)
    assert spy.calls == 2  # a dry run leaves nothing to build
