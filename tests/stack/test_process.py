"""The service processes as an operator starts them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request

import grpc
import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.runtime.healthcheck import wait_until_serving
from tests.stack.support import start_stack
from tests.support.stack import free_port

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=18)]


def test_bad_setting_is_refused_at_start_naming_the_value(tmp_path) -> None:
    env = {**os.environ, "RAG_RETRIEVER_PORT": "not-a-port", "RAG_DATA_DIR": str(tmp_path)}
    result = run_stack_to_exit(env, timeout_s=120)
    assert result.returncode == 2
    assert "RAG_RETRIEVER_PORT='not-a-port'" in result.stderr


def test_contradictory_store_settings_are_refused(tmp_path) -> None:
    env = {**os.environ, "QDRANT_URL": "http://qdrant:6333", "RAG_DATA_DIR": str(tmp_path)}
    env.pop("OPENSEARCH_URL", None)
    result = run_stack_to_exit(env, timeout_s=120)
    assert result.returncode == 2
    assert "QDRANT_URL" in result.stderr and "OPENSEARCH_URL" in result.stderr


def test_stack_process_serves_then_shuts_down_gracefully_on_sigterm(tmp_path) -> None:
    ports = {"RAG_INDEXER_PORT": free_port(), "RAG_RETRIEVER_PORT": free_port()}
    env = {
        **os.environ,
        **{k: str(v) for k, v in ports.items()},
        "RAG_DATA_DIR": str(tmp_path),
        "RAG_RERANKER_ADDR": "",
    }
    proc = start_stack(env)
    try:
        assert wait_serving(ports["RAG_RETRIEVER_PORT"], 120)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    output = proc.stdout.read().decode() if proc.stdout else ""
    assert "shutdown_requested" in output
    assert "server_stopped" in output


def run_stack_to_exit(env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.stack"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def wait_serving(port: int, timeout_s: float) -> bool:
    return wait_until_serving(f"127.0.0.1:{port}", timeout_s=timeout_s)


def test_stack_process_serves_each_apps_metrics_on_its_own_listener(tmp_path) -> None:
    grpc_ports = {"RAG_INDEXER_PORT": free_port(), "RAG_RETRIEVER_PORT": free_port()}
    metrics = {"RAG_INDEXER_METRICS_PORT": free_port(), "RAG_RETRIEVER_METRICS_PORT": free_port()}
    env = {
        **os.environ,
        **{k: str(v) for k, v in {**grpc_ports, **metrics}.items()},
        "RAG_METRICS_ENABLED": "true",
        "RAG_DATA_DIR": str(tmp_path),
        "RAG_RERANKER_ADDR": "",
    }
    proc = subprocess.Popen([sys.executable, "-m", "services.stack"], env=env)
    try:
        assert wait_serving(grpc_ports["RAG_RETRIEVER_PORT"], 120)
        with grpc.insecure_channel(f"127.0.0.1:{grpc_ports['RAG_RETRIEVER_PORT']}") as channel:
            stub = retriever_pb2_grpc.RetrieverStub(channel)
            stub.Retrieve(rpb.RetrieveRequest(query="how do ports work"), timeout=30)
        retriever = scrape(metrics["RAG_RETRIEVER_METRICS_PORT"])
        indexer = scrape(metrics["RAG_INDEXER_METRICS_PORT"])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert 'rag_service_info{service="retriever",tracing="off"} 1.0' in retriever
    assert 'grpc_method="Retrieve",grpc_service="rag.retriever.v1.Retriever"' in retriever
    assert "rag_retriever_answers_total" in retriever
    assert 'rag_service_info{service="indexer",tracing="off"} 1.0' in indexer
    assert "rag_indexer_documents_total" in indexer
    assert "rag_retriever_" not in indexer  # each app's registry is its own


def test_a_taken_metrics_port_is_refused_naming_the_setting(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {
            **os.environ,
            "RAG_INDEXER_PORT": str(free_port()),
            "RAG_RETRIEVER_PORT": str(free_port()),
            "RAG_INDEXER_METRICS_PORT": "0",
            "RAG_RETRIEVER_METRICS_PORT": str(taken.getsockname()[1]),
            "RAG_METRICS_ENABLED": "true",
            "RAG_DATA_DIR": str(tmp_path),
            "RAG_RERANKER_ADDR": "",
        }
        result = run_stack_to_exit(env, timeout_s=180)
    assert result.returncode == 2
    assert "RAG_RETRIEVER_METRICS_PORT" in result.stderr


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return str(reply.read().decode())
