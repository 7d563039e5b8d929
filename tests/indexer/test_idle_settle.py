"""Deferred vector builds are made once runs stop coming
(services.indexer.idle_settle). The settle here is a fake that counts its
calls: the timing rule is what is under test; the build itself is tested
against a real store (tests/storage/embedded/test_optimize_due.py)."""

from __future__ import annotations

import asyncio

import pytest

from services.indexer.idle_settle import IdleSettle

pytestmark = pytest.mark.unit

DELAY_S = 0.05


def _counting() -> tuple[IdleSettle, list[int]]:
    calls: list[int] = []

    async def settle() -> None:  # fake: counts instead of building
        calls.append(1)

    return IdleSettle(DELAY_S, settle), calls


def test_the_settle_runs_once_after_the_delay_from_the_last_run() -> None:
    async def scenario() -> list[int]:
        idle, calls = _counting()
        idle.arm()
        await asyncio.sleep(DELAY_S / 2)
        idle.arm()  # another run ended: the delay starts again
        await asyncio.sleep(DELAY_S * 0.75)
        assert calls == []
        await asyncio.sleep(DELAY_S)
        return calls

    assert asyncio.run(scenario()) == [1]


def test_a_run_that_starts_disarms_it_and_stopping_cancels_it() -> None:
    async def scenario() -> list[int]:
        idle, calls = _counting()
        idle.arm()
        idle.disarm()  # a run started
        await asyncio.sleep(DELAY_S * 2)
        idle.arm()
        idle.cancel()  # the Indexer stops
        await asyncio.sleep(DELAY_S * 2)
        return calls

    assert asyncio.run(scenario()) == []


def test_a_failing_settle_is_logged_and_the_next_one_still_runs() -> None:
    async def scenario() -> list[int]:
        calls: list[int] = []

        async def settle() -> None:  # fake: fails the first time
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("disk full")

        idle = IdleSettle(DELAY_S, settle)
        idle.arm()
        await asyncio.sleep(DELAY_S * 2)
        idle.arm()
        await asyncio.sleep(DELAY_S * 2)
        return calls

    assert asyncio.run(scenario()) == [1, 1]
