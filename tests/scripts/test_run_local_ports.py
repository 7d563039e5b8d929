"""`make run` follows the settings a user gives the services: their ports
(the launcher waits on, and points each service at, the ports they really
listen on) and RAG_DATA_DIR (the index it starts and fills)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import run_local

pytestmark = pytest.mark.unit


def test_each_services_port_setting_moves_the_port_the_launcher_uses() -> None:
    environ = {"RAG_GATEWAY_PORT": "8181", "RAG_RERANKER_PORT": " 50063 ", "RAG_INDEXER_PORT": "x"}
    ports = run_local.chosen_ports(run_local.DEFAULT_PORTS, "PORT", environ)
    assert ports == {"indexer": 50051, "retriever": 50052, "reranker": 50063, "gateway": 8181}
    metrics = run_local.chosen_ports(
        run_local.DEFAULT_METRICS_PORTS, "METRICS_PORT", {"RAG_RETRIEVER_METRICS_PORT": "9566"}
    )
    assert metrics["retriever"] == 9566 and metrics["gateway"] == 9464


def test_the_services_find_each_other_and_the_page_where_the_ports_are(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ports = {"indexer": 50061, "retriever": 50062, "reranker": 50063, "gateway": 8181}
    monkeypatch.setattr(run_local, "PORTS", ports)
    monkeypatch.delenv("RAG_RERANKER_ADDR", raising=False)
    monkeypatch.delenv("RAG_RETRIEVER_ADDR", raising=False)
    env = run_local.service_env(tmp_path)
    assert env["RAG_RERANKER_ADDR"] == "localhost:50063"
    assert env["RAG_RETRIEVER_ADDR"] == "localhost:50062"
    assert "http://localhost:8181" in env["RAG_GATEWAY_ALLOWED_ORIGINS"].split(",")
    assert run_local.page_origin() == "http://localhost:8181"
    assert run_local.moved_addresses() == ("localhost:50061", "localhost:50062")
    monkeypatch.setenv("RAG_RERANKER_ADDR", "reranker.internal:50053")  # the user's own wins
    assert run_local.service_env(tmp_path)["RAG_RERANKER_ADDR"] == "reranker.internal:50053"


def test_the_data_folder_is_rag_data_dir_when_set() -> None:
    assert run_local.default_data_dir({"RAG_DATA_DIR": "/var/lib/rag-v2"}) == "/var/lib/rag-v2"
    assert run_local.default_data_dir({"RAG_DATA_DIR": "  "}).endswith(".data")
    assert run_local.default_data_dir({}).endswith(".data")
