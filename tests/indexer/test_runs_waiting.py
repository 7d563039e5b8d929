"""How many write runs may wait for the index: each holds its request in
memory while it waits, so past `MAX_RUNS_WAITING` a run is refused at once
(RESOURCE_EXHAUSTED, nothing written), and the ones waiting still run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.errors import ResourceExhausted
from services.indexer.servicer import MAX_RUNS_WAITING, IndexerServicer
from tests.indexer.test_run_deadlines import FaultyIndex, HashEmbedder, open_faulty

pytestmark = pytest.mark.unit


@pytest.fixture
def index(tmp_path: Path) -> Iterator[FaultyIndex]:
    yield from open_faulty(tmp_path, HashEmbedder())


class CallerContext:
    """Fault injection stand-in for a gRPC call's context: no deadline, and
    nothing ends the call early."""

    def time_remaining(self) -> float | None:
        return None

    def add_done_callback(self, callback: Any) -> None:
        pass


async def test_a_run_beyond_those_that_may_wait_is_refused(index: FaultyIndex) -> None:
    servicer = IndexerServicer(index.pipeline)
    ran: list[int] = []
    await servicer._write_lock.acquire()  # a run in its thread: the others wait
    waiting = [
        asyncio.ensure_future(servicer._run(CallerContext(), lambda control, n=n: ran.append(n)))
        for n in range(MAX_RUNS_WAITING + 1)
    ]
    await asyncio.sleep(0.05)
    with pytest.raises(
        ResourceExhausted, match=f"already wait for the index, at most {MAX_RUNS_WAITING}"
    ):
        await servicer._run(CallerContext(), lambda control: ran.append(-1))
    servicer._write_lock.release()
    await asyncio.gather(*waiting)
    assert sorted(ran) == list(range(MAX_RUNS_WAITING + 1))
    await servicer._run(CallerContext(), lambda control: ran.append(99))  # room again
    assert ran[-1] == 99
