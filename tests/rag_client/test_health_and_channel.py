"""`serving` (the Retriever's gRPC health service) and a channel the caller
opened, blocking and asyncio alike, against the fault-injecting fake server
(its health service is grpc's own)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

from rag_client import (
    AsyncRetrieverClient,
    ClientSettings,
    RetrieverClient,
    RetryPolicy,
    Unavailable,
)
from rag_client.retriever import SERVICE_NAME
from tests.rag_client.fault_server import Faults, fail
from tests.support.stack import free_port

pytestmark = pytest.mark.unit

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
ONCE = RetryPolicy(max_attempts=1)


@pytest.fixture
def health(faults: Faults) -> Iterator[Faults]:
    yield faults
    faults.health.set(SERVICE_NAME, SERVING)


class _Seen(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Records the methods called on the channel it is on."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.methods.append(details.method)
        return continuation(details, request)


class _SeenAio(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        method = details.method  # bytes in grpc.aio
        self.methods.append(method.decode() if isinstance(method, bytes) else method)
        return await continuation(details, request)


def test_serving_reads_the_health_service(health: Faults, target: str) -> None:
    with RetrieverClient(ClientSettings(target, retry=ONCE)) as client:
        health.health.set(SERVICE_NAME, SERVING)
        assert client.serving() is True
        health.health.set(SERVICE_NAME, NOT_SERVING)
        assert client.serving() is False


def test_a_health_service_that_does_not_answer_is_a_call_error() -> None:
    target = f"127.0.0.1:{free_port()}"  # nothing listens there
    client = RetrieverClient(ClientSettings(target, retry=ONCE))
    with client, pytest.raises(Unavailable):
        client.serving(deadline=5.0)


def test_a_given_channel_carries_every_call_and_the_token(faults: Faults, target: str) -> None:
    seen = _Seen()
    channel = grpc.intercept_channel(grpc.insecure_channel(target), seen)
    settings = ClientSettings(target, token="tok-given", retry=ONCE)
    faults.health.set(SERVICE_NAME, SERVING)
    with RetrieverClient(settings, channel) as client:
        assert client.serving() is True
        assert client.retrieve("q").hits[0].text == "q"
        faults.reset(fail(grpc.StatusCode.UNAVAILABLE))
        with pytest.raises(Unavailable) as down:
            client.retrieve("q")  # one attempt: the settings' policy still applies
    assert down.value.attempts == 1
    assert seen.methods == [
        "/grpc.health.v1.Health/Check",
        "/rag.retriever.v1.Retriever/Retrieve",
        "/rag.retriever.v1.Retriever/Retrieve",
    ]
    assert faults.calls[0].metadata["authorization"] == "Bearer tok-given"


async def test_async_serving_and_a_given_channel(health: Faults, target: str) -> None:
    seen = _SeenAio()
    channel = grpc.aio.insecure_channel(target, interceptors=[seen])
    async with AsyncRetrieverClient(ClientSettings(target, retry=ONCE), channel) as client:
        health.health.set(SERVICE_NAME, SERVING)
        assert await client.serving() is True
        health.health.set(SERVICE_NAME, NOT_SERVING)
        assert await client.serving() is False
        assert (await client.index_status()).committed_generation == 7
    assert seen.methods == [
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Check",
        "/rag.retriever.v1.Retriever/IndexStatus",
    ]
