"""/readyz asks the Retriever at most once per TTL, however many ask it
(gateway/readiness.py): 3,000 pipelined /readyz were 3,000 health calls."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from gateway.readiness import Readiness
from gateway.retriever_client import RetrieverClient

pytestmark = pytest.mark.unit


class CountingRetriever:
    """Stands in for RetrieverClient.is_serving: counts the health calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.answer: tuple[bool, str] = (True, "")

    async def is_serving(self, timeout_s: float) -> tuple[bool, str]:
        self.calls += 1
        await asyncio.sleep(0.01)  # concurrent askers wait for this one call
        return self.answer


async def test_one_health_call_per_ttl_for_any_number_of_askers() -> None:
    now = [100.0]
    retriever = CountingRetriever()
    readiness = Readiness(
        cast(RetrieverClient, retriever), None, timeout_s=1.0, ttl_s=1.0, clock=lambda: now[0]
    )
    answers = await asyncio.gather(*(readiness.state() for _ in range(3000)))
    assert retriever.calls == 1
    assert set(answers) == {(True, "")}
    retriever.answer = (False, "retriever is not serving")
    now[0] += 0.5
    assert await readiness.state() == (True, "")  # still within the TTL
    now[0] += 0.6
    assert await readiness.state() == (False, "retriever is not serving")
    assert retriever.calls == 2


async def test_shared_limits_storage_that_does_not_answer_is_not_ready() -> None:
    class SilentStorage:
        async def check(self) -> bool:
            raise ConnectionError("redis is gone")

    readiness = Readiness(
        cast(RetrieverClient, CountingRetriever()), cast(Any, SilentStorage()), timeout_s=1.0
    )
    assert await readiness.state() == (False, "redis does not answer")
