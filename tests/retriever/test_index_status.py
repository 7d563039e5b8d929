"""Retriever.IndexStatus over real gRPC: the served generation and whether the
latest release record covers it; without a source it answers, never
UNIMPLEMENTED, and reports no release (so a gate that needs one stays shut)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.retriever.servicer import SERVICE_NAME, RetrieverServicer
from services.runtime.server import GrpcServer, ServerOptions
from services.storage.visibility import ReleaseVerdict

pytestmark = pytest.mark.integration

Source = Callable[[], tuple[int, ReleaseVerdict | None]] | None


class Served:
    """What the fake manifest says; tests change it between calls."""

    def __init__(self) -> None:
        self.generation = 0
        self.verdict: ReleaseVerdict | None = None
        self.calls = 0

    def __call__(self) -> tuple[int, ReleaseVerdict | None]:
        self.calls += 1
        return self.generation, self.verdict


async def _status(source: Source) -> Any:
    pipeline: Any = None  # IndexStatus never touches the retrieval pipeline
    servicer = RetrieverServicer(pipeline, default_deadline_ms=1000, index_status=source)
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0), [SERVICE_NAME])
    retriever_pb2_grpc.add_RetrieverServicer_to_server(servicer, server.server)
    port = await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = retriever_pb2_grpc.RetrieverStub(channel)
            return await stub.IndexStatus(pb.IndexStatusRequest(), timeout=5)
    finally:
        await server.stop()


@pytest.fixture
def served() -> Served:
    return Served()


async def test_without_a_source_reports_generation_zero_and_no_release() -> None:
    reply = await _status(None)
    assert reply.committed_generation == 0
    assert not reply.release_recorded and not reply.release_current


async def test_release_current_only_for_a_passing_record_of_the_served_generation(
    served: Served,
) -> None:
    served.generation = 7
    none = await _status(served)
    assert (none.committed_generation, none.release_recorded) == (7, False)

    served.verdict = ReleaseVerdict(7, True, "2030-01-01T00:00:00Z")
    current = await _status(served)
    assert current.release_recorded and current.release_passed and current.release_current
    assert (current.release_generation, current.release_recorded_at) == (
        7,
        "2030-01-01T00:00:00Z",
    )

    served.generation = 8  # a new ingest committed after the check
    stale = await _status(served)
    assert stale.release_passed and not stale.release_current
    assert (stale.committed_generation, stale.release_generation) == (8, 7)

    served.verdict = ReleaseVerdict(8, False, "2030-01-01T00:01:00Z")
    failed = await _status(served)
    assert failed.release_recorded and not failed.release_passed and not failed.release_current
    assert served.calls == 4  # read fresh on every call; callers cache
