"""Retrieve from a few paced clients until told to stop: live users, not a flood.

Each of N clients sends the next query from a shared list, waits for the
answer, then waits out the rest of its interval before the next one (a slow
answer is followed at once). Unlike bench.common.retrieve_loop's closed loop,
which runs the service flat out, this keeps the offered load the same in two
runs whose service speed differs (idle vs while an ingest runs), so their
latencies are comparable, and it leaves the machine time for the ingest.

Every answer keeps what the latency comparison needs: the client-side
latency, the degraded components with their reasons, the server's stage
timings (which channel was slow) and the gRPC status of a failed call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from bench.common.clients import bench_retriever_async
from rag_client import AsyncRetrieverClient, CallError
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

StopFn = Callable[[], bool]


@dataclass(frozen=True)
class Sample:
    """One Retrieve as the client saw it."""

    latency_ms: float
    sent_at: float = 0.0  # Unix time it was sent, to set against the server's log
    degraded: tuple[str, ...] = ()  # "component: reason" per degradation
    stages_ms: dict[str, float] = field(default_factory=dict)  # the server's timings
    error: str = ""  # gRPC status name when the call failed


@dataclass(frozen=True)
class Pacing:
    clients: int
    interval_s: float  # per client, start to start
    timeout_s: float = 30.0


def run_paced(
    addr: str, queries: Sequence[str], scope: str, pacing: Pacing, stop: StopFn
) -> list[Sample]:
    """Send queries (cycling through `queries`) until `stop()` is true."""
    return asyncio.run(_run_paced(addr, queries, scope, pacing, stop))


async def _run_paced(
    addr: str, queries: Sequence[str], scope: str, pacing: Pacing, stop: StopFn
) -> list[Sample]:
    samples: list[Sample] = []
    sent = 0
    async with bench_retriever_async(addr, pacing.timeout_s) as retriever:

        async def client(offset: float) -> None:
            nonlocal sent
            await asyncio.sleep(offset)  # spread the clients over one interval
            while not stop():
                started, sent_at = time.monotonic(), time.time()
                text = queries[sent % len(queries)]
                sent += 1
                sample = await _call(retriever, text, scope, pacing.timeout_s)
                samples.append(replace(sample, sent_at=sent_at))
                await asyncio.sleep(max(0.0, pacing.interval_s - (time.monotonic() - started)))

        step = pacing.interval_s / max(pacing.clients, 1)
        await asyncio.gather(*(client(i * step) for i in range(pacing.clients)))
    return samples


async def _call(client: AsyncRetrieverClient, text: str, scope: str, timeout_s: float) -> Sample:
    request = pb.RetrieveRequest(
        query=text, filter=pb.ScopeFilter(scope_id=scope), disable_rerank=True
    )
    started = time.perf_counter()
    try:
        reply = await client.retrieve(request, deadline=timeout_s)
    except CallError as exc:
        return Sample((time.perf_counter() - started) * 1000, error=exc.code.name)
    latency_ms = (time.perf_counter() - started) * 1000
    degraded = tuple(f"{d.component}: {d.reason}" for d in reply.degraded)
    return Sample(latency_ms, degraded=degraded, stages_ms={t.stage: t.ms for t in reply.timings})


def stop_after(seconds: float) -> StopFn:
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() >= deadline
