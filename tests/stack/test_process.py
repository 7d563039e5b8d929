"""The service processes as an operator starts them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from services.common.healthcheck import wait_until_serving
from tests.support.stack import free_port

pytestmark = pytest.mark.integration


def test_bad_setting_is_refused_at_start_naming_the_value(tmp_path) -> None:
    env = {**os.environ, "RAG_RETRIEVER_PORT": "not-a-port", "RAG_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "services.stack"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "RAG_RETRIEVER_PORT='not-a-port'" in result.stderr


def test_contradictory_store_settings_are_refused(tmp_path) -> None:
    env = {**os.environ, "QDRANT_URL": "http://qdrant:6333", "RAG_DATA_DIR": str(tmp_path)}
    env.pop("OPENSEARCH_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "services.stack"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
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
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.stack"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
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


def wait_serving(port: int, timeout_s: float) -> bool:
    return wait_until_serving(f"127.0.0.1:{port}", timeout_s=timeout_s)
