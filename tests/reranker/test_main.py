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


def test_sigterm_during_a_long_warm_up_stops_before_it_ends(tmp_path: Path) -> None:
    """SIGTERM during a long warm-up (batches of 512 pairs) was obeyed only
    when the warm-up ended, 70 s later (probe): its model runs are abandoned
    now, and the process stops cleanly before the warm-up is done."""
    process = start(
        {
            "RAG_RERANKER_PORT": str(free_port()),
            "RAG_HOST": "127.0.0.1",
            "RAG_RERANK_BATCH_SIZE": "512",
            "RAG_RERANK_CACHE_DIR": str(tmp_path),
            "RAG_LOG_JSON": "true",
        }
    )
    assert process.stderr is not None
    seen = []
    try:
        for line in process.stderr:  # loaded: the warm-up starts
            seen.append(line)
            if '"event": "rerank_model_loaded"' in line:
                break
    finally:
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=120)
    log = "".join(seen) + rest
    assert '"event": "rerank_model_loaded"' in log, log
    assert process.returncode == 0, log
    assert '"event": "rerank_warmed_up"' not in log, log
