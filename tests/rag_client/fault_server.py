"""A FAKE Retriever and Indexer, used only to inject faults into the client's
unit tests: an in-process gRPC server (real gRPC, real wire, real deadlines)
whose answers follow a script (fail with a status code, be slow, or answer),
recording what each call carried (metadata, the deadline it arrived with,
when it arrived). Results from the real services are tested against the real
stack (test_retriever_stack.py, test_tls_and_token.py)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.indexer.v1 import indexer_pb2_grpc
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc


@dataclass(frozen=True)
class Step:
    """One scripted answer: wait `delay` seconds, then fail with `code` (if set)."""

    code: grpc.StatusCode | None = None
    details: str = ""
    delay: float = 0.0
    after: int = 0  # streams: messages sent before failing


OK = Step()
OVERSIZED_BYTES = 6 * 1024 * 1024


def fail(
    code: grpc.StatusCode, details: str = "injected", delay: float = 0.0, after: int = 0
) -> Step:
    return Step(code, details, delay, after)


@dataclass(frozen=True)
class Seen:
    method: str
    request: Any
    metadata: dict[str, str]
    time_remaining: float | None  # the deadline the call arrived with, in seconds
    arrived: float  # time.monotonic()


class Faults:
    """The script (shared by both fake services) and the record of calls."""

    def __init__(self) -> None:
        self.script: deque[Step] = deque()
        self.calls: list[Seen] = []
        self._lock = threading.Lock()
        # grpc's own health service (not scripted): tests set what it reports.
        self.health = health.HealthServicer()

    def reset(self, *steps: Step) -> None:
        with self._lock:
            self.script = deque(steps)
            self.calls = []

    def _next(self, method: str, request: Any, context: Any) -> Step:
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        seen = Seen(method, request, metadata, context.time_remaining(), time.monotonic())
        with self._lock:
            self.calls.append(seen)
            step = self.script.popleft() if self.script else OK
        time.sleep(step.delay)
        return step

    def serve_stream(
        self, method: str, request: Any, context: Any, messages: list[Any]
    ) -> Iterator[Any]:
        step = self._next(method, request, context)
        yield from messages[: step.after] if step.code is not None else messages
        if step.code is not None:
            context.abort(step.code, step.details)

    def serve(self, method: str, request: Any, context: Any, answer: Callable[[], Any]) -> Any:
        step = self._next(method, request, context)
        if step.code is not None:
            context.abort(step.code, step.details)
        return answer()


class FakeRetriever(retriever_pb2_grpc.RetrieverServicer):  # type: ignore[misc]
    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def Retrieve(self, request: rpb.RetrieveRequest, context: Any) -> rpb.RetrieveResponse:
        # "oversized": an answer past gRPC's default 4 MiB, within the services' 16.
        text = "x" * OVERSIZED_BYTES if request.query == "oversized" else request.query
        hit = rpb.Hit(doc_id="fake.md", rank=1, text=text)
        return self.faults.serve(
            "Retrieve", request, context, lambda: rpb.RetrieveResponse(hits=[hit])
        )

    def IndexStatus(self, request: rpb.IndexStatusRequest, context: Any) -> Any:
        reply = rpb.IndexStatusResponse(committed_generation=7)
        return self.faults.serve("IndexStatus", request, context, lambda: reply)


class FakeIndexer(indexer_pb2_grpc.IndexerServicer):  # type: ignore[misc]
    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def Upsert(self, request: ipb.UpsertRequest, context: Any) -> ipb.UpsertResponse:
        reply = ipb.UpsertResponse(dry_run=request.dry_run)
        return self.faults.serve("Upsert", request, context, lambda: reply)

    def UpsertStream(self, request: ipb.UpsertRequest, context: Any) -> Iterator[Any]:
        total = len(request.documents)
        progress = [ipb.UpsertProgress(documents_done=n, documents_total=total) for n in (0, 1)]
        last = ipb.UpsertProgress(
            documents_done=total, documents_total=total, result=ipb.UpsertResponse(dry_run=True)
        )
        return self.faults.serve_stream("UpsertStream", request, context, [*progress, last])

    def Stats(self, request: ipb.StatsRequest, context: Any) -> ipb.StatsResponse:
        reply = ipb.StatsResponse(documents=3)
        return self.faults.serve("Stats", request, context, lambda: reply)


def start_fake(faults: Faults, port: int = 0) -> tuple[grpc.Server, str]:
    """The fake server on `port` (0: a free one) of the loopback address."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    retriever_pb2_grpc.add_RetrieverServicer_to_server(FakeRetriever(faults), server)
    health_pb2_grpc.add_HealthServicer_to_server(faults.health, server)
    indexer_pb2_grpc.add_IndexerServicer_to_server(FakeIndexer(faults), server)
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, f"127.0.0.1:{port}"


def serve_faults() -> Iterator[tuple[Faults, str]]:
    """Start the fake server on a free loopback port; yields (faults, target)."""
    faults = Faults()
    server, target = start_fake(faults)
    try:
        yield faults, target
    finally:
        server.stop(grace=None)
