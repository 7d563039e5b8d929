"""`run_channel`: one channel's blocking search, its outcome and its timing.
The searches here are plain functions (fakes labelled as such: they raise or
return on demand); the real stores' deadline behaviour is in the store
conformance suite."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from services.core.errors import DeadlineExceeded, StoreUnavailable
from services.core.models import ScoredChunk
from services.retriever.channels import ChannelStatus, call_as, run_channel
from services.retriever.types import Channel
from tests.storage.harness import make_chunk, stored

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def executor():  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(2) as pool:
        yield pool


def _hits() -> list[ScoredChunk]:
    return [ScoredChunk(stored(make_chunk("doc-a")), 0.5)]


def _store_stopped_at_its_deadline() -> list[ScoredChunk]:
    raise DeadlineExceeded("postgres-vectors search stopped at its deadline")


def _store_down() -> list[ScoredChunk]:
    raise StoreUnavailable("connection refused")


async def test_hits_are_ok(executor) -> None:  # type: ignore[no-untyped-def]
    outcome = await run_channel(Channel.VECTOR, executor, _hits, 1.0)
    assert outcome.status is ChannelStatus.OK and len(outcome.hits) == 1


async def test_a_store_stopped_by_the_deadline_it_was_given_is_a_timeout(executor) -> None:  # type: ignore[no-untyped-def]
    for search in (
        _store_stopped_at_its_deadline,
        lambda: call_as("vector", _store_stopped_at_its_deadline),  # as the channels wrap it
    ):
        outcome = await run_channel(Channel.VECTOR, executor, search, 1.0)
        assert outcome.status is ChannelStatus.TIMEOUT
        assert outcome.error == "timed out after 1000 ms"


async def test_any_other_failure_is_an_error_naming_it(executor) -> None:  # type: ignore[no-untyped-def]
    outcome = await run_channel(Channel.LEXICAL, executor, _store_down, 1.0)
    assert outcome.status is ChannelStatus.ERROR
    assert outcome.error == "StoreUnavailable: connection refused"


async def test_no_time_left_skips_the_channel(executor) -> None:  # type: ignore[no-untyped-def]
    outcome = await run_channel(Channel.LEXICAL, executor, _hits, 0.0)
    assert outcome.status is ChannelStatus.SKIPPED
