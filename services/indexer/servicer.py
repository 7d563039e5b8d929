"""gRPC adapter for the Indexer: proto messages ↔ IndexingPipeline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as pb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.core.deadline import Deadline
from services.core.errors import InvalidArgument, ResourceExhausted
from services.core.field_rules import canonical_language_tag
from services.core.logging import get_logger
from services.indexer.audit import AuditProgress, AuditReport
from services.indexer.idle_settle import IdleSettle
from services.indexer.index_stats import collect_stats
from services.indexer.messages import (
    audit_report_to_proto,
    keep_from_proto,
    report_to_proto,
    writable_documents,
)
from services.indexer.pipeline import IndexingPipeline, IndexReport, Progress
from services.indexer.release_records import record_release
from services.indexer.run_control import RunControl
from services.indexer.validation import (
    check_batch_size,
    check_scope_id,
    delete_ids,
)
from services.indexer.verify import IndexVerifier
from services.indexer.worker_threads import WorkerThreads
from services.runtime import grpc_errors
from services.runtime.security.callers import Role, method_roles
from services.runtime.security.scopes import check_writable
from services.runtime.security.server_auth import current_caller
from services.storage.base import UNREQUESTED_READ_S

log = get_logger(__name__)
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Indexer"].full_name
# Write runs that may wait behind the one running: each holds its request in
# memory while it waits (a probe: 30 waiting 8 MB Upserts took 763 MB more).
MAX_RUNS_WAITING = 16
# Writers change documents in the scopes they hold; whatever reads or repairs
# across every scope, or marks a release, is an admin's.
METHOD_ROLES = method_roles(
    SERVICE_NAME,
    {
        "Upsert": Role.WRITER,
        "UpsertStream": Role.WRITER,
        "Delete": Role.WRITER,
        "Sync": Role.WRITER,
        "Stats": Role.ADMIN,
        "Verify": Role.ADMIN,
        "RecordRelease": Role.ADMIN,
    },
)


async def progress_then_result(
    start: Callable[[Callable[[Any], None]], Awaitable[Any]],
) -> AsyncIterator[tuple[bool, Any]]:
    """Run `start(on_progress)` and yield (False, progress) for each report
    (made from any thread) as it comes, then (True, result); its error is raised."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_progress(value: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, ("progress", value))

    async def run() -> None:
        try:
            await queue.put(("result", await start(on_progress)))
        except BaseException as exc:  # handed to the stream below
            await queue.put(("error", exc))

    task = asyncio.create_task(run())
    while True:
        kind, item = await queue.get()
        if kind == "error":
            raise item
        yield kind == "result", item
        if kind == "result":
            break
    await task


def run_control_for(context: grpc.aio.ServicerContext) -> RunControl:
    """The caller's deadline (if it set one) and a flag raised when the RPC
    ends early; the callback also fires on normal completion, by then unused."""
    remaining = context.time_remaining()
    control = RunControl.within(remaining)
    context.add_done_callback(lambda _: control.cancel())
    return control


class IndexerServicer(indexer_pb2_grpc.IndexerServicer):
    def __init__(
        self, pipeline: IndexingPipeline, run_nice: int = 0, settle_after_s: float = 0.0
    ) -> None:
        """`run_nice`: the nice value of each run's thread (RAG_INDEX_WORK_NICE);
        `settle_after_s`: idle seconds before deferred vector builds are made
        (RAG_VECTOR_SETTLE_AFTER_S; services.indexer.idle_settle)."""
        self.pipeline = pipeline
        self.verifier = IndexVerifier(pipeline.embedder, pipeline.storage, pipeline.recover)
        # Embedded stores have a single writer: runs are serialised.
        self._write_lock = asyncio.Lock()
        self.workers = WorkerThreads(nice=run_nice)
        self.idle_settle = IdleSettle(settle_after_s, self._settle_vectors)
        # Builds that follow a run's reply, queued for the runs' lock.
        self._builds_after_runs: set[asyncio.Task[Any]] = set()
        self._runs = 0  # write runs of callers, waiting or running

    async def _locked(
        self,
        fn: Callable[..., Any],
        *args: Any,
        on_cancel: Callable[[], None] | None = None,
        admit: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn` in a worker thread under the write lock, and keep the lock
        until the thread is done even when the RPC is cancelled: a thread
        cannot be stopped, and a second run starting beside one that is still
        writing would recover (undo) it and reuse its generation. A cancelled
        RPC returns at once (its run is told to stop and undoes itself at its
        next check); the lock is released when the thread ends."""
        await self._write_lock.acquire()
        if admit is not None:  # its turn came: may it still start?
            try:
                admit()
            except BaseException:
                self._write_lock.release()
                raise
        work = asyncio.ensure_future(self.workers.run(fn, *args, **kwargs))
        work.add_done_callback(self._release_after)
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if on_cancel is not None:
                on_cancel()
            raise

    def _release_after(self, work: asyncio.Future[Any]) -> None:
        self._write_lock.release()
        if not work.cancelled():
            work.exception()  # retrieved: a cancelled caller no longer awaits it

    async def settle(self, timeout_s: float) -> bool:
        """After the server stopped: wait up to `timeout_s` for runs still in
        their threads; False if one is still running (see worker_threads).
        No deferred build starts from now on."""
        self.idle_settle.cancel()
        for build in self._builds_after_runs:
            build.cancel()  # one in its thread already is waited for below
        return await self.workers.settle(timeout_s)

    async def _run(
        self, context: grpc.aio.ServicerContext, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """A write run bound to its caller: it stops and is undone when the
        caller's deadline is about to pass or the caller goes away."""
        if self._runs > MAX_RUNS_WAITING:
            raise ResourceExhausted(
                f"write runs: {self._runs - 1} already wait for the index, at most "
                f"{MAX_RUNS_WAITING}; nothing was written, send it again later"
            )
        control = run_control_for(context)
        self.idle_settle.disarm()
        self._runs += 1
        try:
            report = await self._locked(
                fn,
                *args,
                control=control,
                on_cancel=control.cancel,
                admit=control.check_start,
                **kwargs,
            )
        finally:
            self._runs -= 1
            if self.pipeline.defer_vector_builds:
                self.idle_settle.arm()
        if isinstance(report, IndexReport) and not report.dry_run:
            self._build_after_reply()
        return report

    def _build_after_reply(self) -> None:
        """The vector build a committed run leaves, after its reply is sent
        (queued for the runs' lock: the next run waits for it, this run's
        caller does not)."""
        if self.pipeline.build_in_run:
            return
        build = asyncio.ensure_future(self._locked(self.pipeline.build_vectors_after_run))
        self._builds_after_runs.add(build)
        build.add_done_callback(self._build_done)

    def _build_done(self, build: asyncio.Task[Any]) -> None:
        self._builds_after_runs.discard(build)
        if not build.cancelled() and (exc := build.exception()) is not None:
            log.warning("vector_build_after_run_failed", error=str(exc))

    async def _settle_vectors(self) -> None:
        """Deferred builds made, under the runs' lock; while other work holds
        it (a verify, a cancelled run's thread) the settle is tried again later."""
        if self._write_lock.locked():
            self.idle_settle.arm()
            return
        await self._locked(self.pipeline.settle_vectors)

    @grpc_errors.unary
    async def Upsert(
        self, request: pb.UpsertRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpsertResponse:
        check_batch_size("documents", len(request.documents), self.pipeline.planner.limits)
        docs = writable_documents(request.documents)
        report = await self._run(context, self.pipeline.upsert, docs, dry_run=request.dry_run)
        return report_to_proto(report)

    @grpc_errors.streaming
    async def UpsertStream(
        self, request: pb.UpsertRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.UpsertProgress]:
        check_batch_size("documents", len(request.documents), self.pipeline.planner.limits)
        docs = writable_documents(request.documents)

        def start(on_progress: Callable[[Progress], None]) -> Awaitable[IndexReport]:
            upsert = self.pipeline.upsert
            return self._run(context, upsert, docs, dry_run=request.dry_run, progress=on_progress)

        async for final, item in progress_then_result(start):
            if final:
                n = len(item.plans)
                yield pb.UpsertProgress(
                    documents_done=n,
                    documents_total=n,
                    chunks_embedded=item.counts.chunks_to_embed,
                    result=report_to_proto(item),
                )
            else:
                yield pb.UpsertProgress(
                    documents_done=item.documents_done,
                    documents_total=item.documents_total,
                    chunks_embedded=item.chunks_embedded,
                )

    @grpc_errors.unary
    async def Delete(
        self, request: pb.DeleteRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteResponse:
        locale = canonical_language_tag(request.locale)
        doc_ids = delete_ids(request.doc_ids, locale, self.pipeline.planner.limits)
        report = await self._run(
            context,
            self.pipeline.delete,
            doc_ids,
            locale,
            dry_run=request.dry_run,
            scopes=current_caller().scopes,
        )
        response = report_to_proto(report)
        return pb.DeleteResponse(
            outcomes=response.outcomes, counts=response.counts, dry_run=response.dry_run
        )

    @grpc_errors.unary
    async def Sync(
        self, request: pb.SyncRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpsertResponse:
        check_scope_id("scope_id", request.scope_id, self.pipeline.planner.limits)
        check_writable([request.scope_id], current_caller(), "scope_id")
        check_batch_size("documents", len(request.documents), self.pipeline.planner.limits)
        docs = writable_documents(request.documents)
        foreign = [d.doc_id for d in docs if d.scope_id != request.scope_id]
        if foreign:
            raise InvalidArgument(
                f"documents: {len(foreign)} are not in scope {request.scope_id!r} "
                f"(first: {foreign[0]!r})"
            )
        keep = keep_from_proto(request.keep, self.pipeline.planner.limits)
        since = request.no_sync_since if request.HasField("no_sync_since") else None
        report = await self._run(
            context,
            self.pipeline.sync,
            request.scope_id,
            docs,
            keep,
            dry_run=request.dry_run,
            no_sync_since=since,
        )
        return report_to_proto(report)

    @grpc_errors.streaming
    async def Verify(
        self, request: pb.VerifyRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.VerifyProgress]:
        """Under the write lock: an audit racing a run would report its rows."""

        def start(on_progress: Callable[[AuditProgress], None]) -> Awaitable[AuditReport]:
            return self._locked(self.verifier.verify, request.repair, on_progress)

        async for final, item in progress_then_result(start):
            if final:
                yield pb.VerifyProgress(phase="done", report=audit_report_to_proto(item))
            else:
                yield pb.VerifyProgress(phase=item.phase, done=item.done, total=item.total)

    @grpc_errors.unary
    async def RecordRelease(
        self, request: pb.RecordReleaseRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordReleaseResponse:
        deadline = Deadline.from_grpc(context, default_s=UNREQUESTED_READ_S)
        response: pb.RecordReleaseResponse = await self._locked(
            record_release, self.pipeline.manifest, request, deadline
        )
        return response

    @grpc_errors.unary
    async def Stats(
        self, request: pb.StatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.StatsResponse:
        deadline = Deadline.from_grpc(context, default_s=UNREQUESTED_READ_S)
        stats = await asyncio.to_thread(collect_stats, self.pipeline, deadline)
        chunking = stats.chunking
        return pb.StatsResponse(
            documents=stats.documents,
            chunks=stats.chunks,
            chunks_by_locale=stats.chunks_by_locale,
            vectors=stats.vectors,
            lexical_rows=stats.lexical_rows,
            manifest_rows=stats.documents,
            chunking=pb.ChunkingParams(
                target_chars=chunking.get("target_chars", 0),
                overlap_chars=chunking.get("overlap_chars", 0),
                max_chars=chunking.get("max_chars", 0),
                version=chunking.get("version", ""),
            ),
            last_run=pb.PlanCounts(**stats.last_run),
            embedding_model=self.pipeline.embedder.model_name,
            embedding_dim=self.pipeline.embedder.dim,
            vector_backend=self.pipeline.storage.vectors.name,
            lexical_backend=self.pipeline.storage.lexical.name,
            committed_generation=stats.committed_generation,
            pending_documents=stats.pending_documents,
            document_encoders=stats.document_encoders,
        )
