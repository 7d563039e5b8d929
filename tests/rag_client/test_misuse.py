"""What a caller can get wrong around a client, each answered with one of
the package's exceptions (probe, 2026-12-06): a token file gRPC cannot send,
close() while a call runs (from another thread or task), one string where a
list is meant, errors crossing a process pool, a stream never iterated. The
server is the fault-injecting fake (tests/rag_client/fault_server.py): a
stall is injected as a delay."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
from pathlib import Path

import grpc
import pytest

from rag_client import (
    AsyncRetrieverClient,
    ClientClosed,
    ClientSettings,
    IndexerClient,
    InvalidSettings,
    RetrieverClient,
    RetryPolicy,
    Unavailable,
)
from rag_client.errors import error_for
from rag_client.reranker import rerank_request
from tests.rag_client.fault_server import Faults, fail

pytestmark = pytest.mark.unit

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"S3CR\xe9T\n", "not UTF-8 text"),
        (b"S3CRET-one\nS3CRET-two\n", "printable ASCII"),
        (b"S3CRET\x00def", "printable ASCII"),
        (b"Bearer S3CRET", "'Bearer ' is added by the client"),
        (b"two S3CRET", "without spaces"),
        (b"  \n", "the file is empty"),
    ],
)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_token_file_gRPC_cannot_send_is_named_before_a_call(
    faults: Faults, target: str, tmp_path: Path, content: bytes, why: str, kind: str
) -> None:
    """A raw UnicodeDecodeError, an INTERNAL 'Invalid metadata' (sync) or a
    cygrpc ExecuteBatchError (async) before; the server saw nothing."""
    path = tmp_path / "token"
    path.write_bytes(content)
    settings = ClientSettings(target, token_file=path)
    with pytest.raises(InvalidSettings) as refused:
        if kind == "sync":
            with RetrieverClient(settings) as client:
                client.retrieve("q")
        else:

            async def search() -> None:
                async with AsyncRetrieverClient(settings) as client:
                    await client.retrieve("q")

            asyncio.run(search())
    assert refused.value.field == "token_file" and why in str(refused.value)
    assert str(path) in str(refused.value) and "S3CR" not in str(refused.value)
    assert faults.calls == []


def test_a_token_file_emptied_mid_rotation_keeps_the_last_token(
    faults: Faults, target: str, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text("tok-first\n")
    with RetrieverClient(ClientSettings(target, token_file=path)) as client:
        client.retrieve("q")
        path.write_text("")  # a rotation that truncates before it writes
        client.retrieve("q")
    assert [call.metadata["authorization"] for call in faults.calls] == ["Bearer tok-first"] * 2


PAUSING = RetryPolicy(max_attempts=10, initial_backoff=0.3, multiplier=1.0, jitter=0.0)


@pytest.mark.parametrize("phase", ["in flight", "in a retry's pause"])
def test_close_from_another_thread_during_a_call_raises_client_closed(
    faults: Faults, target: str, phase: str
) -> None:
    """A raw ValueError ('Cannot invoke RPC on closed channel!') in a retry's
    pause, a CANCELLED OtherCallError in flight, before."""
    step = fail(UNAVAILABLE) if phase == "in a retry's pause" else fail(UNAVAILABLE, delay=2)
    faults.reset(*[step] * 10)
    client = RetrieverClient(ClientSettings(target, retry=PAUSING, timeout=5))
    raised: list[BaseException] = []

    def search() -> None:
        try:
            client.retrieve("q")
        except BaseException as exc:  # recorded for the assertion
            raised.append(exc)

    thread = threading.Thread(target=search)
    thread.start()
    time.sleep(0.15)
    client.close()
    thread.join(10)
    assert len(raised) == 1 and isinstance(raised[0], ClientClosed), raised
    assert "the client" in str(raised[0])


@pytest.mark.parametrize("phase", ["in flight", "in a retry's pause"])
async def test_close_from_another_task_raises_client_closed_not_cancelled(
    faults: Faults, target: str, phase: str
) -> None:
    """A bare CancelledError in a task nobody cancelled (in flight) or a
    cygrpc UsageError (in a pause), before."""
    step = fail(UNAVAILABLE) if phase == "in a retry's pause" else fail(UNAVAILABLE, delay=2)
    faults.reset(*[step] * 10)
    client = AsyncRetrieverClient(ClientSettings(target, retry=PAUSING, timeout=5))
    search = asyncio.create_task(client.retrieve("q"))
    await asyncio.sleep(0.15)
    await client.close()
    with pytest.raises(ClientClosed, match=r"the client (is|was) closed"):
        await search


async def test_the_callers_own_cancellation_stays_a_cancellation(
    faults: Faults, target: str
) -> None:
    faults.reset(fail(UNAVAILABLE, delay=2))
    async with AsyncRetrieverClient(ClientSettings(target, timeout=5)) as client:
        search = asyncio.create_task(client.retrieve("q"))
        await asyncio.sleep(0.15)
        search.cancel()
        with pytest.raises(asyncio.CancelledError):
            await search


def test_one_string_where_a_list_is_meant_is_refused(faults: Faults, target: str) -> None:
    """delete("guide/backup.md") deleted documents g, u, i, d, e, ... (probe)."""
    with IndexerClient(target) as client, pytest.raises(TypeError, match="doc_ids"):
        client.delete("guide/backup.md")
    with pytest.raises(TypeError, match="passages"):
        rerank_request("q", "one passage")  # type: ignore[arg-type]
    assert faults.calls == []


def test_errors_cross_a_process_boundary_whole() -> None:
    """Not picklable before: raised in a ProcessPoolExecutor worker, they broke
    the pool (BrokenProcessPool)."""
    error = error_for(UNAVAILABLE, "backend down", method="Retriever/Retrieve", attempts=3)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is Unavailable and str(copy) == str(error)
    assert (copy.code, copy.details, copy.method, copy.attempts) == (
        UNAVAILABLE,
        "backend down",
        "Retriever/Retrieve",
        3,
    )
    invalid = pickle.loads(pickle.dumps(InvalidSettings("target", "not host:port")))
    assert (invalid.field, str(invalid)) == ("target", "target: not host:port")


def test_a_stream_never_iterated_writes_nothing(faults: Faults, target: str) -> None:
    """It started at call time: a write committed, or was undone, by when the
    garbage collector got to the generator (probe)."""
    from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb

    with IndexerClient(target) as client:
        stream = client.upsert_stream([ipb.Document(doc_id="a.md", scope_id="s", text="x")])
        time.sleep(0.2)
        assert faults.calls == []
        assert list(stream)  # iterated: it runs
    assert [call.method for call in faults.calls] == ["UpsertStream"]


def test_an_async_client_used_from_another_event_loop_says_so(target: str) -> None:
    """A raw RuntimeError ('... attached to a different loop', 'Event loop is
    closed') before, with a never-awaited coroutine warning (probe)."""
    from rag_client import WrongEventLoop

    async def make() -> AsyncRetrieverClient:
        return AsyncRetrieverClient(target)

    client = asyncio.run(make())  # its loop closes when asyncio.run returns
    with pytest.raises(WrongEventLoop, match="another event loop"):
        asyncio.run(client.retrieve("q"))


def test_a_number_too_large_for_a_float_is_refused_as_out_of_range() -> None:
    """10**400 raised a raw OverflowError from math.isfinite (probe)."""
    from rag_client.deadline import Deadline

    with pytest.raises(InvalidSettings, match="timeout"):
        ClientSettings("h:1", timeout=10**400)
    with pytest.raises(ValueError, match="deadline"):
        Deadline.after(10**400)


def test_one_document_where_a_list_is_meant_is_named(target: str) -> None:
    from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb

    with IndexerClient(target) as client, pytest.raises(TypeError, match=r"documents: .* one"):
        client.upsert(ipb.Document(doc_id="a.md"))  # type: ignore[arg-type]


async def test_a_client_shows_its_target_and_state_never_its_token() -> None:
    settings = ClientSettings("retriever.internal:50052", token="S3CRET-token-value")
    client, aio = RetrieverClient(settings), AsyncRetrieverClient(settings)
    assert repr(client) == "<RetrieverClient retriever.internal:50052 open>"
    client.close()
    await aio.close()
    assert repr(client).endswith(" closed>") and repr(aio).endswith(" closed>")
    assert "S3CRET" not in repr(client) + repr(aio)
