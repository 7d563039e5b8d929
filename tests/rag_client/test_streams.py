"""Server-streaming calls (UpsertStream): the messages arrive in order, a
failure before or in the middle of the stream is this package's exception,
the stream is never retried and carries the deadline and the token (the fake
server injects the faults)."""

from __future__ import annotations

import grpc
import pytest

from rag_client import (
    AsyncIndexerClient,
    ClientSettings,
    IndexerClient,
    OtherCallError,
    RetryPolicy,
    Unavailable,
    indexer_pb2,
)
from tests.rag_client.fault_server import Faults, fail

pytestmark = pytest.mark.unit

DOCS = [indexer_pb2.Document(doc_id=f"d{n}.md", text="# T\n\nBody.") for n in range(3)]


def settings(target: str) -> ClientSettings:
    return ClientSettings(target, token="tok-stream", retry=RetryPolicy(max_attempts=4))


def test_progress_arrives_in_order_with_the_result_last(faults: Faults, target: str) -> None:
    with IndexerClient(settings(target)) as indexer:
        progress = list(indexer.upsert_stream(DOCS, deadline=4.0))
    assert [p.documents_done for p in progress] == [0, 1, 3]
    assert progress[-1].HasField("result") and not progress[0].HasField("result")
    call = faults.calls[0]
    assert call.metadata["authorization"] == "Bearer tok-stream"
    assert 3.5 < (call.time_remaining or 0) <= 4.05


def test_a_failure_before_the_first_message_is_raised_and_not_retried(
    faults: Faults, target: str
) -> None:
    faults.reset(fail(grpc.StatusCode.UNAVAILABLE, "restarting"))
    with IndexerClient(settings(target)) as indexer, pytest.raises(Unavailable) as err:
        list(indexer.upsert_stream(DOCS))
    assert err.value.method == "Indexer/UpsertStream" and len(faults.calls) == 1


def test_a_failure_mid_stream_comes_after_the_messages_already_sent(
    faults: Faults, target: str
) -> None:
    faults.reset(fail(grpc.StatusCode.INTERNAL, "store write failed", after=2))
    seen = []
    with IndexerClient(settings(target)) as indexer, pytest.raises(OtherCallError) as err:
        for progress in indexer.upsert_stream(DOCS):
            seen.append(progress.documents_done)
    assert seen == [0, 1] and err.value.details == "store write failed"


async def test_the_async_stream_behaves_alike(faults: Faults, target: str) -> None:
    async with AsyncIndexerClient(settings(target)) as indexer:
        done = [p.documents_done async for p in indexer.upsert_stream(DOCS)]
        faults.reset(fail(grpc.StatusCode.UNAVAILABLE, after=1))
        with pytest.raises(Unavailable):
            async for _ in indexer.upsert_stream(DOCS):
                pass
    assert done == [0, 1, 3] and len(faults.calls) == 1
