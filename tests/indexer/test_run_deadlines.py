"""A write run bound to its caller: it stops and is undone when the caller's
deadline is about to pass or the caller goes away, and nothing of it is
ever committed after the caller was told it failed.

- RunControl on a fake clock (unit);
- an IndexingPipeline on real embedded stores with a fake embedder and a
  fault-injecting lexical store (unit), and one whose deadline passes
  between two of its store writes, so a store call itself refuses (unit);
- Upsert through the real Indexer server with a deadline too short for the
  work, and one cancelled by its caller (integration, real model).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.deadline import Deadline
from services.core.errors import Cancelled, DeadlineExceeded, StoreError
from services.core.models import Chunk, Document, ScopeFilter
from services.embedding.embedder import Embedder, EmbeddingIdentity
from services.indexer.app import build_indexing_pipeline
from services.indexer.audit import AuditReport
from services.indexer.pipeline import IndexingPipeline
from services.indexer.planning import DocState
from services.indexer.run_control import COMMIT_MARGIN_S, RunControl
from services.indexer.servicer import IndexerServicer
from services.indexer.settings import IndexerSettings
from services.indexer.verify import IndexVerifier
from services.runtime.grpc_errors import status_for
from services.storage.base import LexicalStore, VectorStore, unrequested_deadline
from services.storage.factory import open_manifest, open_stores
from services.storage.manifest import Manifest
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage, embedding_text
from services.storage.visibility import committed_generation
from tests.support.clock import ManualClock
from tests.support.stack import BackgroundStack

# --- RunControl on a fake clock ------------------------------------------------------


@pytest.mark.unit
def test_check_raises_deadline_exceeded_only_within_the_margin() -> None:
    clock = ManualClock(1000.0)
    control = RunControl(Deadline(1010.0, clock))
    control.check()
    control.check_commit()
    clock.now = 1010.0 - COMMIT_MARGIN_S / 2  # time left, but less than the commit needs
    control.check()
    control.check(margin_s=COMMIT_MARGIN_S / 4)
    with pytest.raises(DeadlineExceeded, match="nothing was committed"):
        control.check_commit()
    with pytest.raises(DeadlineExceeded):
        control.check(margin_s=1.0)
    clock.now = 1010.0  # the deadline itself
    with pytest.raises(DeadlineExceeded):
        control.check()


@pytest.mark.unit
def test_check_raises_cancelled_after_cancel() -> None:
    control = RunControl(Deadline(2000.0, ManualClock(1000.0)))
    control.check()
    control.cancel()
    with pytest.raises(Cancelled, match="undone"):
        control.check()
    with pytest.raises(Cancelled):
        control.check_commit()
    # From another thread (the RPC's done-callback runs on the event loop).
    other = RunControl(Deadline.never(ManualClock(1000.0)))
    worker = threading.Thread(target=other.cancel)
    worker.start()
    worker.join()
    with pytest.raises(Cancelled):
        other.check()


@pytest.mark.unit
def test_a_run_that_waited_out_its_time_behind_others_says_so() -> None:
    """Writes are serialised: a run whose turn comes with less than the
    commit's margin left is refused before it writes, saying it waited (a
    probe's 40 concurrent one-page Upserts with 0.5 s deadlines were told
    "sqlite manifest: no time left in the deadline for recording a run's
    intents")."""
    clock = ManualClock(1000.0)
    control = RunControl(Deadline(1000.5, clock))
    control.check_start()
    clock.now = 1000.5 - COMMIT_MARGIN_S / 2  # its turn, 380 ms later
    with pytest.raises(DeadlineExceeded, match="waited 375 ms behind earlier runs"):
        control.check_start()
    control.cancel()
    with pytest.raises(Cancelled, match="while the run waited; nothing was written"):
        control.check_start()


@pytest.mark.unit
def test_a_deadline_shorter_than_the_commit_margin_is_said_as_such() -> None:
    """Probe: a write sent with a 200 ms deadline was refused in 1 ms as if it
    had waited behind earlier runs."""
    clock = ManualClock(1000.0)
    control = RunControl(Deadline(1000.2, clock))
    with pytest.raises(DeadlineExceeded) as refused:
        control.check_start()
    assert str(refused.value) == (
        "the call's deadline (200 ms) is shorter than the 250 ms a run keeps to commit; "
        "nothing was written (allow more than 250 ms)"
    )


@pytest.mark.unit
async def test_a_refused_turn_hands_the_write_lock_on(faulty: FaultyIndex) -> None:
    """The servicer (on real embedded stores) refuses the run that waited
    too long before it writes, and releases the lock: the run behind it
    still gets its turn."""
    servicer = IndexerServicer(faulty.pipeline)
    clock = ManualClock(1000.0)
    late = RunControl(Deadline(1000.4, clock))
    clock.now = 1000.5  # its turn came after its deadline
    ran: list[str] = []
    with pytest.raises(DeadlineExceeded, match="behind earlier runs"):
        await servicer._locked(
            lambda control: ran.append("late"), control=late, admit=late.check_start
        )
    in_time = RunControl(Deadline(1010.0, clock))
    await servicer._locked(
        lambda control: ran.append("in time"), control=in_time, admit=in_time.check_start
    )
    assert ran == ["in time"]
    assert not servicer._write_lock.locked()


@pytest.mark.unit
def test_no_deadline_never_raises() -> None:
    clock = ManualClock(1000.0)
    control = RunControl(Deadline.never(clock))
    for now in (0.0, 1e6, 1e12):
        clock.now = now
        control.check()
        control.check(margin_s=1e9)
        control.check_commit()
    assert not RunControl.within(None).deadline.bounded
    bounded = RunControl.within(30.0)
    assert bounded.deadline.remaining_s() > 29
    bounded.check_commit()


# --- fault injection in the pipeline: the lexical store fails mid-run ---------------


class HashEmbedder:
    """FAKE (test double): deterministic unit vectors from a text's hash, so a
    unit test needs no model; the same text always gets the same vector."""

    dim = 16
    model_name = "fake-hash-embedder"
    identity = EmbeddingIdentity(model_name, dim, "fake")
    document_encoder = "fake-hash"

    def __init__(self) -> None:
        self.texts = 0

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        if between is not None:
            between()
        self.texts += len(texts)
        rows = []
        for text in texts:
            digest = hashlib.sha256(text.encode()).digest()
            row = np.frombuffer(digest[: self.dim], dtype=np.uint8).astype(np.float32) - 127.5
            rows.append(row / np.linalg.norm(row))
        return np.array(rows, dtype=np.float32)


class FailingUpserts:
    """FAULT INJECTION around the REAL lexical store: once armed, its
    `fail_at`-th upsert call raises StoreError (nothing written); every other
    call, and every other method, goes to the real store."""

    def __init__(self, inner: LexicalStore, fail_at: int) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.armed = False
        self.calls = 0
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def upsert(self, chunks: Sequence[Chunk], deadline: Deadline) -> None:
        if self.armed:
            self.calls += 1
            if self.calls == self.fail_at:
                self.failed += 1
                raise StoreError("injected failure: lexical upsert batch rejected")
        self.inner.upsert(chunks, deadline)


def sections(title: str, words: Sequence[str]) -> str:
    parts = [
        f"## Section {w}\n\nThis section explains the {w} procedure in some detail, with "
        f"enough words to fill a chunk of its own. Operators configure {w} before a run."
        for w in words
    ]
    return f"# {title}\n\n" + "\n\n".join(parts)


def page(doc_id: str, words: Sequence[str], title: str = "") -> Document:
    return Document(
        doc_id,
        sections(doc_id.title(), words),
        url=f"https://x.test/{doc_id}",
        title=title or doc_id.title(),
        scope_id="site",
    )


@dataclass
class FaultyIndex:
    pipeline: IndexingPipeline
    vectors: VectorStore
    lexical: FailingUpserts
    manifest: Manifest
    embedder: HashEmbedder

    def state(self) -> tuple[object, ...]:
        """Everything the run could have changed, row by row."""
        rows = [
            sorted((r for page in store.scan() for r in page), key=lambda r: r.chunk_id)
            for store in (self.vectors, self.lexical)
        ]
        entries = sorted(self.manifest.entries(), key=lambda e: (e.doc_id, e.locale))
        return (entries, *rows, committed_generation(self.manifest, unrequested_deadline()))

    def verify(self) -> AuditReport:
        """The audit the Indexer's Verify runs, without repair."""
        verifier = IndexVerifier(
            self.embedder,  # type: ignore[arg-type]
            Storage(self.vectors, self.lexical, self.manifest),  # type: ignore[arg-type]
            self.pipeline.recover,
        )
        return verifier.verify()


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[FaultyIndex]:
    yield from open_faulty(tmp_path, HashEmbedder())


def open_faulty(tmp_path: Path, embedder: HashEmbedder) -> Iterator[FaultyIndex]:
    stores = StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED)
    vectors, lexical = open_stores(stores, embedder.dim)
    manifest = open_manifest(stores)
    failing = FailingUpserts(lexical, fail_at=2)
    # write_batch=1: each document's new chunks are one write batch of their own.
    settings = IndexerSettings(
        chunk_target_chars=200, chunk_overlap_chars=0, chunk_max_slack_chars=100, write_batch=1
    )
    pipeline = build_indexing_pipeline(settings, embedder, Storage(vectors, failing, manifest))  # type: ignore[arg-type]
    yield FaultyIndex(pipeline, vectors, failing, manifest, embedder)
    vectors.close()
    lexical.close()
    manifest.close()


BASE = [
    page("alpha", ["zephyrquill", "brambleoxide", "lanternmoss"]),
    page("beta", ["copperwren", "saltmarigold"], title="Beta title"),
    page("gamma", ["velvetgeyser"]),
]
# 1st batch: alpha's changed chunks overwrite committed rows; 2nd batch: delta's
# new rows reach the vector store, then the lexical store fails.
FAILING_RUN = [
    page("alpha", ["zephyrquill", "tundrafalcon", "lanternmoss"]),
    page("delta", ["quasarmarmot", "nebulacrocus"]),
    page("beta", ["copperwren", "saltmarigold"], title="Retitled beta"),
]


@pytest.mark.unit
def test_a_store_failure_mid_run_is_undone_in_process(faulty: FaultyIndex) -> None:
    faulty.pipeline.upsert(BASE)
    before = faulty.state()
    assert committed_generation(faulty.manifest, unrequested_deadline()) == 1

    faulty.lexical.armed = True
    with pytest.raises(StoreError, match="injected failure"):
        faulty.pipeline.upsert(FAILING_RUN)
    assert faulty.lexical.failed == 1  # the fault fired, at the 2nd batch

    assert faulty.state() == before
    assert faulty.manifest.open_intents(deadline=unrequested_deadline()) == []
    assert faulty.vectors.get(
        faulty.manifest.get("alpha", "en", deadline=unrequested_deadline()).chunk_ids,
        deadline=unrequested_deadline(),
    )  # type: ignore[union-attr]
    visible = ScopeFilter(
        visible_generation=committed_generation(faulty.manifest, unrequested_deadline())
    )
    assert faulty.lexical.search("tundrafalcon", 5, visible, deadline=unrequested_deadline()) == []
    assert faulty.lexical.search("quasarmarmot", 5, visible, deadline=unrequested_deadline()) == []
    # The restored vectors are those of the restored text (re-embedded).
    for row in (r for page in faulty.lexical.scan() for r in page):
        query = faulty.embedder.embed_documents([embedding_text(row)])[0].tolist()
        assert (
            faulty.vectors.search(query, 1, visible, deadline=unrequested_deadline())[
                0
            ].chunk.chunk_id
            == row.chunk_id
        )

    # Once the store works again the same run commits, and the index is whole.
    faulty.lexical.armed = False
    report = faulty.pipeline.upsert(FAILING_RUN)
    assert [p.state for p in report.plans] == [
        DocState.CHANGED,
        DocState.ADDED,
        DocState.METADATA_ONLY,
    ]
    assert committed_generation(faulty.manifest, unrequested_deadline()) == 2
    audit = faulty.verify()
    assert audit.clean and audit.findings == []


class RecordingEmbedder(HashEmbedder):
    """FAKE (test double): a HashEmbedder that keeps every text it embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        self.seen.extend(texts)
        return super().embed_documents(texts, between)


@pytest.mark.unit
def test_an_undo_writes_back_only_the_rows_the_run_reached(tmp_path: Path) -> None:
    """A run planned to overwrite alpha's and gamma's rows and failed at its
    first batch (alpha's): gamma's rows were never written, so the undo
    leaves them alone instead of re-embedding them (a crashed run of many
    changed pages held a restart for 40-60 s re-embedding rows it never
    reached, probe); alpha's are put back, re-embedded."""
    embedder = RecordingEmbedder()
    opened = open_faulty(tmp_path, embedder)
    faulty = next(opened)
    try:
        run_reached_only_alpha(faulty, embedder)
    finally:
        next(opened, None)  # closes the stores


def run_reached_only_alpha(faulty: FaultyIndex, embedder: RecordingEmbedder) -> None:
    faulty.pipeline.upsert(BASE)
    before = faulty.state()
    faulty.lexical.fail_at, faulty.lexical.armed = 1, True
    embedder.seen.clear()
    with pytest.raises(StoreError, match="injected failure"):
        faulty.pipeline.upsert(
            [
                page("alpha", ["zephyrquill", "tundrafalcon", "lanternmoss"]),
                page("gamma", ["ravenquartz"]),
            ]
        )
    assert faulty.state() == before
    assert any("brambleoxide" in text for text in embedder.seen)  # alpha's row, put back
    assert not any("velvetgeyser" in text or "ravenquartz" in text for text in embedder.seen)
    assert faulty.verify().clean


# --- the deadline passes between two store writes: the store refuses the second -----


class SlowEmbedder(HashEmbedder):
    """FAKE (test double) with a manual clock: once armed, its `slow_pass`-th
    embedding pass takes `pass_s` of that clock, after the run's check at
    its start (`between`), as a pass that starts in time and ends late does."""

    def __init__(self, clock: ManualClock, slow_pass: int, pass_s: float) -> None:
        super().__init__()
        self.clock, self.slow_pass, self.pass_s = clock, slow_pass, pass_s
        self.armed = False
        self.passes = 0

    def embed_documents(
        self, texts: Sequence[str], between: Callable[[], None] | None = None
    ) -> np.ndarray:
        rows = super().embed_documents(texts, between)
        if self.armed:
            self.passes += 1
            if self.passes == self.slow_pass:
                self.clock.now += self.pass_s
        return rows


@pytest.mark.unit
def test_a_run_whose_deadline_passes_between_writes_is_stopped_by_the_store(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1000.0)
    embedder = SlowEmbedder(clock, slow_pass=2, pass_s=60.0)
    opened = open_faulty(tmp_path, embedder)
    index = next(opened)
    try:
        index.pipeline.upsert(BASE)
        before = index.state()
        embedder.armed = True
        control = RunControl(Deadline.after(30.0, clock))
        with pytest.raises(DeadlineExceeded, match="no time left in the deadline") as stopped:
            index.pipeline.upsert(FAILING_RUN, control=control)
        assert status_for(stopped.value) == grpc.StatusCode.DEADLINE_EXCEEDED
        # The run's 1st batch was written, its 2nd refused by the vector store
        # (RunControl's own check says "before the run committed"); the 3rd
        # pass re-embeds the rows the undo writes back.
        assert embedder.passes == 3
        # Undone although the deadline had passed: the undo does not run under it.
        assert index.state() == before
        assert index.manifest.open_intents(deadline=unrequested_deadline()) == []
        audit = index.verify()
        assert audit.clean and audit.findings == []
    finally:
        opened.close()


# --- through the real Indexer server -------------------------------------------------


class RunWatch:
    """OBSERVER around the real manifest (no fault): records the generations
    whose intents were cleared or committed, so a test knows when the server
    finished undoing a run without guessing with sleeps."""

    def __init__(self, inner: Manifest) -> None:
        self.inner = inner
        self.cleared: list[int] = []
        self.committed: list[int] = []
        self._changed = threading.Condition()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def clear_intents(self, generation: int, deadline: Deadline) -> None:
        self.inner.clear_intents(generation, deadline)
        with self._changed:
            self.cleared.append(generation)
            self._changed.notify_all()

    def commit_run(self, generation: int, *args: Any, **kwargs: Any) -> None:
        self.inner.commit_run(generation, *args, **kwargs)
        with self._changed:
            self.committed.append(generation)
            self._changed.notify_all()

    def wait_cleared(self, generation: int, timeout: float = 60) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: generation in self.cleared, timeout)


class HangOnce:
    """FAULT INJECTION around the REAL lexical store: once armed, the next
    upsert stalls until `release` is set (at most `hang_s`), then writes."""

    def __init__(self, inner: LexicalStore, hang_s: float = 10.0) -> None:
        self.inner = inner
        self.hang_s = hang_s
        self.armed = False
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.resumed = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def upsert(self, chunks: Sequence[Chunk], deadline: Deadline) -> None:
        if not self.armed:
            self.inner.upsert(chunks, deadline)
            return
        self.armed = False
        self.stalled.set()
        self.release.wait(self.hang_s)
        try:
            # The stall stands for a write already under way when the deadline
            # passed (an embedded one cannot be interrupted): it lands late.
            self.inner.upsert(chunks, unrequested_deadline())
        finally:
            self.resumed.set()


@dataclass
class Served:
    stack: BackgroundStack
    watch: RunWatch
    hang: HangOnce


@pytest.fixture
def served(tmp_path: Path, embedder: Embedder) -> Iterator[Served]:
    # 64 chunks per write batch: the first batch alone takes seconds to embed
    # on 2 cores, far longer than the deadlines below.
    stack = BackgroundStack(tmp_path / "data", embedder, indexer={"write_batch": 64})
    parts: dict[str, Any] = {}

    def wrap(vectors: VectorStore, lexical: LexicalStore) -> tuple[Any, Any]:
        assert stack.runtime is not None
        parts["watch"] = RunWatch(stack.runtime.storage.manifest)
        stack.runtime.storage.manifest = parts["watch"]  # type: ignore[assignment]
        parts["hang"] = HangOnce(lexical)
        return vectors, parts["hang"]

    stack.wrap_stores = wrap
    stack.start()
    assert stack.upsert(SERVED_BASE).counts.added == len(SERVED_BASE)
    yield Served(stack, parts["watch"], parts["hang"])
    parts["hang"].release.set()
    stack.stop()


def served_page(doc_id: str, text: str) -> ipb.Document:
    return ipb.Document(
        doc_id=doc_id,
        title=doc_id.title(),
        url=f"https://docs.test/{doc_id}",
        scope_id="site",
        locale="en",
        text=text,
    )


SERVED_BASE = [
    served_page("harbour", "# Harbour\n\nThe harbourlantern page explains mooring and ports."),
    served_page("orchard", "# Orchard\n\nThe orchard page covers pruning and ladders."),
]
SLOW_WORD = "quasarmarmot"  # in every document of the slow run, nowhere else
CHANGED_WORD = "nebulacrocus"  # the slow run's new wording of "harbour"


def slow_run(n_docs: int = 40) -> list[ipb.Document]:
    """About 150 chunks of 800 characters: tens of seconds of embedding on 2
    cores. The first document rewrites a committed one, so undo must restore it."""
    docs = [
        served_page("harbour", f"# Harbour\n\nThe {CHANGED_WORD} page replaces the mooring notes.")
    ]
    for i in range(n_docs):
        parts = [
            f"## Part {j}\n\n"
            + " ".join(
                f"Record {i}.{j}.{k} notes that the {SLOW_WORD} gauge {k} drifts by "
                f"{i * j + k} units under load."
                for k in range(8)
            )
            for j in range(4)
        ]
        docs.append(served_page(f"slow-{i:03d}", f"# Slow {i}\n\n" + "\n\n".join(parts)))
    return docs


def stats_counts(stack: BackgroundStack) -> tuple[int, ...]:
    s = stack.indexer.Stats(ipb.StatsRequest(), timeout=30)
    return (s.documents, s.chunks, s.vectors, s.lexical_rows, s.committed_generation)


def poll_stats(
    stack: BackgroundStack, done: Callable[[ipb.StatsResponse], bool], timeout_s: float = 60
) -> ipb.StatsResponse:
    deadline = time.monotonic() + timeout_s
    while True:
        stats = stack.indexer.Stats(ipb.StatsRequest(), timeout=30)
        if done(stats) or time.monotonic() > deadline:
            return stats
        time.sleep(0.1)


def lexical_doc_ids(stack: BackgroundStack, query: str) -> list[str]:
    hits = stack.retrieve(query, top_k=20, channels=[rpb.CHANNEL_LEXICAL], disable_rerank=True).hits
    return [h.doc_id for h in hits]


def verify(stack: BackgroundStack) -> ipb.VerifyReport:
    stream = stack.indexer.Verify(ipb.VerifyRequest(), timeout=120)
    return next(m.report for m in stream if m.HasField("report"))


def assert_nothing_committed(served: Served, before: tuple[int, ...], generation: int) -> None:
    """After the server undid the run `generation`: the index is as it was."""
    stack = served.stack
    assert served.watch.wait_cleared(generation), "the server never finished the undo"
    assert generation not in served.watch.committed
    stats = poll_stats(stack, lambda s: s.pending_documents == 0)
    assert stats.pending_documents == 0
    assert stats_counts(stack) == before
    report = verify(stack)
    assert report.clean and report.findings_total == 0, [str(f) for f in report.findings]
    assert lexical_doc_ids(stack, SLOW_WORD) == []
    assert lexical_doc_ids(stack, CHANGED_WORD) == []
    assert lexical_doc_ids(stack, "harbourlantern") == ["harbour"]


@pytest.mark.integration
def test_an_upsert_past_its_deadline_commits_nothing(served: Served) -> None:
    stack = served.stack
    # The deadline must pass while the run writes. On a loaded CI machine 1 s
    # once passed before, in planning: nothing was begun, so there was no undo
    # to check; such an attempt must change nothing, and the next has longer.
    for timeout_s in (1.0, 3.0, 9.0):
        before = stats_counts(stack)
        generation = before[-1] + 1
        request = ipb.UpsertRequest(documents=slow_run())
        with pytest.raises(grpc.RpcError) as failure:
            stack.indexer.Upsert(request, timeout=timeout_s)
        assert failure.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        if served.watch.wait_cleared(generation, timeout=60):
            break
        assert stats_counts(stack) == before, "a run refused before writing changed the index"
    else:
        pytest.fail("no attempt reached its writes before its deadline")
    # The run began (its intents were recorded, then cleared by the undo);
    # whatever of it reached the stores was removed: every count, uncommitted
    # rows included, is as before. (Rows it never reached are left alone by
    # the undo, so its writes are no measure of how far the run got.)
    assert_nothing_committed(served, before, generation)


@pytest.mark.integration
def test_an_upsert_cancelled_by_its_caller_commits_nothing(served: Served) -> None:
    stack = served.stack
    before = stats_counts(stack)
    generation = before[-1] + 1
    call = stack.indexer.Upsert.future(ipb.UpsertRequest(documents=slow_run()), timeout=120)
    started = poll_stats(stack, lambda s: s.pending_documents > 0)
    assert started.pending_documents > 0, "the server never started the run"
    assert not call.done()
    assert call.cancel()
    assert call.cancelled()
    with pytest.raises(grpc.FutureCancelledError):
        call.result()
    assert_nothing_committed(served, before, generation)


@pytest.mark.integration
def test_a_run_past_its_deadline_holds_the_write_lock_until_it_is_undone(
    served: Served,
) -> None:
    stack, hang = served.stack, served.hang
    doomed = [
        served_page(f"doomed-{i}", f"# Doomed {i}\n\nThe {SLOW_WORD} page number {i}.")
        for i in range(3)
    ]
    hang.armed = True  # the doomed run's lexical write stalls past its deadline
    # The deadline must pass in that write: on a loaded machine 1 s can pass
    # before the run reaches it (nothing written, nothing to hold); the next
    # attempt has longer, and the stall outlasts any of them.
    for timeout_s in (1.0, 3.0, 9.0):
        with pytest.raises(grpc.RpcError) as failure:
            stack.indexer.Upsert(ipb.UpsertRequest(documents=doomed), timeout=timeout_s)
        assert failure.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        if hang.stalled.is_set():
            break
    else:
        pytest.fail("no attempt reached its lexical write before its deadline")
    # The caller retries with other work (the error message advises fewer documents).
    retry = [served_page("retry", "# Retry\n\nA small retried page about dovetail joints.")]
    stack.indexer.Upsert(ipb.UpsertRequest(documents=retry), timeout=60)
    hang.release.set()
    assert hang.resumed.wait(60)
    poll_stats(stack, lambda s: s.pending_documents == 0)
    assert lexical_doc_ids(stack, SLOW_WORD) == [], "rows of a run that failed are served"
    report = verify(stack)
    assert report.clean, [str(f) for f in report.findings]
