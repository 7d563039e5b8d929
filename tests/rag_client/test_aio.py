"""The asyncio clients behave as the blocking ones: retries of UNAVAILABLE
within the deadline, no retry otherwise, the token on every call (the fake
server injects the faults)."""

from __future__ import annotations

import time

import grpc
import pytest

from rag_client import (
    AsyncIndexerClient,
    AsyncRetrieverClient,
    ClientClosed,
    ClientSettings,
    DeadlineExceeded,
    InvalidRequest,
    RetryPolicy,
    Unavailable,
)
from tests.rag_client.fault_server import Faults, fail

pytestmark = pytest.mark.unit

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
STEADY = RetryPolicy(max_attempts=3, initial_backoff=0.1, jitter=0.0)


def settings(target: str) -> ClientSettings:
    return ClientSettings(target, token="tok-async", retry=STEADY)


async def test_unavailable_is_retried_then_answered(faults: Faults, target: str) -> None:
    faults.reset(fail(UNAVAILABLE))
    async with AsyncRetrieverClient(settings(target)) as client:
        reply = await client.retrieve("q", top_k=2, scope_id="handbook")
        status = await client.index_status()
    assert reply.hits[0].doc_id == "fake.md" and status.committed_generation == 7
    first = faults.calls[0]
    assert first.request.top_k == 2 and first.request.filter.scope_id == "handbook"
    assert len(faults.calls) == 3 and faults.calls[1].arrived - first.arrived >= 0.1
    assert {c.metadata["authorization"] for c in faults.calls} == {"Bearer tok-async"}


async def test_retries_stop_at_the_bound_and_other_codes_are_not_retried(
    faults: Faults, target: str
) -> None:
    async with AsyncRetrieverClient(settings(target)) as client:
        faults.reset(*[fail(UNAVAILABLE)] * 5)
        with pytest.raises(Unavailable) as down:
            await client.retrieve("q")
        assert down.value.attempts == 3 and len(faults.calls) == 3
        faults.reset(fail(grpc.StatusCode.INVALID_ARGUMENT, "top_k: 99 is outside 1..50"))
        with pytest.raises(InvalidRequest) as bad:
            await client.retrieve("q", top_k=99)
        assert bad.value.field == "top_k" and len(faults.calls) == 1


async def test_the_deadline_bounds_a_slow_call(faults: Faults, target: str) -> None:
    faults.reset(fail(grpc.StatusCode.INTERNAL, delay=1.0))
    start = time.monotonic()
    async with AsyncRetrieverClient(settings(target)) as client:
        with pytest.raises(DeadlineExceeded):
            await client.retrieve("q", deadline=0.3)
    assert time.monotonic() - start < 0.8


async def test_async_indexer_retries_only_what_is_safe(faults: Faults, target: str) -> None:
    client = AsyncIndexerClient(settings(target))
    faults.reset(fail(UNAVAILABLE))
    with pytest.raises(Unavailable):
        await client.upsert([])
    faults.reset(fail(UNAVAILABLE))
    assert (await client.stats()).documents == 3 and len(faults.calls) == 2
    await client.close()
    with pytest.raises(ClientClosed):
        await client.stats()
