"""`python -m services.reranker` as operators run it: a real subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.runtime.healthcheck import wait_until_serving
from tests.support.stack import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.reranker"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_serving(port: int, timeout_s: float = 120) -> None:
    if not wait_until_serving(f"127.0.0.1:{port}", timeout_s=timeout_s, poll_s=0.2):
        raise TimeoutError(f"reranker on port {port} not SERVING after {timeout_s}s")


def test_invalid_setting_exits_2_naming_it() -> None:
    process = start({"RAG_RERANK_BACKEND": "tensorrt"})
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2
    assert "RAG_RERANK_BACKEND='tensorrt'" in stderr


def test_serves_a_local_model_and_stops_on_sigterm(tiny_model_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    process = start(
        {
            "RAG_RERANKER_PORT": str(port),
            "RAG_HOST": "127.0.0.1",
            "RAG_RERANK_MODEL": str(tiny_model_dir),
            "RAG_RERANK_CACHE_DIR": str(tmp_path),
            "RAG_LOG_JSON": "true",
        }
    )
    try:
        wait_serving(port)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = reranker_pb2_grpc.RerankerStub(channel)
            reply = stub.Rerank(pb.RerankRequest(query="q", passages=["a", "b"]), timeout=30)
        assert reply.scored == 2 and not reply.partial
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0
    assert '"event": "reranker_starting"' in stderr and f'"model": "{tiny_model_dir}"' in stderr
    assert '"event": "reranker_serving"' in stderr


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
    ],
)
def test_a_bad_tracing_setting_exits_2_naming_it(env: dict[str, str], named: str) -> None:
    process = start({"RAG_RERANKER_PORT": str(free_port()), **env})
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2
    assert named in stderr


def test_a_taken_grpc_port_exits_2_naming_the_address() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = start({"RAG_RERANKER_PORT": str(port), "RAG_METRICS_ENABLED": "false"})
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2
    assert f"127.0.0.1:{port}" in stderr
