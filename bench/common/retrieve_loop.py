"""Drive `Retrieve` over gRPC: a closed loop of N concurrent callers.

Each caller takes the next query from a shared list and sends it as soon as
its previous answer arrived, so concurrency is exactly N and the measured
throughput is what N busy clients get. Latency is measured at the client,
from sending the request to having the decoded reply.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench.common.clients import bench_retriever_async
from rag_client import AsyncRetrieverClient, CallError
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb

RequestFactory = Callable[[str], pb.RetrieveRequest]


@dataclass
class Answer:
    query_id: str
    latency_ms: float
    response: pb.RetrieveResponse | None = None
    error: str = ""  # gRPC status name when the call failed


@dataclass
class LoadResult:
    concurrency: int
    wall_s: float
    answers: list[Answer] = field(default_factory=list)

    @property
    def latencies_ms(self) -> list[float]:
        return [a.latency_ms for a in self.answers if a.response is not None]

    @property
    def errors(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for answer in self.answers:
            if answer.error:
                counts[answer.error] = counts.get(answer.error, 0) + 1
        return counts

    @property
    def throughput_rps(self) -> float:
        done = len(self.latencies_ms)
        return round(done / self.wall_s, 2) if self.wall_s > 0 else 0.0


def run_load(
    addr: str,
    queries: Sequence[tuple[str, str]],
    make_request: RequestFactory,
    *,
    concurrency: int = 1,
    timeout_s: float = 30.0,
    keep_responses: bool = True,
) -> LoadResult:
    """Send every (query id, text) once, `concurrency` at a time."""
    return asyncio.run(
        _run_load(addr, queries, make_request, concurrency, timeout_s, keep_responses)
    )


async def _run_load(
    addr: str,
    queries: Sequence[tuple[str, str]],
    make_request: RequestFactory,
    concurrency: int,
    timeout_s: float,
    keep_responses: bool,
) -> LoadResult:
    pending = list(reversed(queries))
    answers: list[Answer] = []
    async with bench_retriever_async(addr, timeout_s) as client:

        async def caller() -> None:
            while pending:
                query_id, text = pending.pop()
                answer = await _call(client, query_id, make_request(text), timeout_s)
                if not keep_responses:
                    answer.response = answer.response and pb.RetrieveResponse()
                answers.append(answer)

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        wall_s = time.perf_counter() - started
    return LoadResult(concurrency, wall_s, answers)


async def _call(
    client: AsyncRetrieverClient,
    query_id: str,
    request: pb.RetrieveRequest,
    timeout_s: float,
) -> Answer:
    started = time.perf_counter()
    try:
        response = await client.retrieve(request, deadline=timeout_s)
    except CallError as exc:
        return Answer(query_id, (time.perf_counter() - started) * 1000, error=exc.code.name)
    return Answer(query_id, (time.perf_counter() - started) * 1000, response)
