"""A misspelt RAG_* variable is named at start with the setting it was
probably meant to be (pydantic-settings ignores it, and the service ran on
the default without a word)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.runtime.known_settings import KNOWN_SETTINGS
from services.runtime.misspelt_settings import Misspelt, misspelt_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.unit
def test_near_misses_are_named_with_the_setting_they_resemble() -> None:
    environ = {
        "RAG_DEFAULT_TOPK": "5",  # an underscore missing
        "RAG_RERANK_MODLE": "packaged:x",  # two letters swapped
        "RAG_DATADIR": "/srv/rag",
        "RAG_GATEWAY_RATE_LIMITT": "5/minute",  # a letter doubled
    }
    assert misspelt_settings(environ) == [
        Misspelt("RAG_DATADIR", "RAG_DATA_DIR"),
        Misspelt("RAG_DEFAULT_TOPK", "RAG_DEFAULT_TOP_K"),
        Misspelt("RAG_GATEWAY_RATE_LIMITT", "RAG_GATEWAY_RATE_LIMIT"),
        Misspelt("RAG_RERANK_MODLE", "RAG_RERANK_MODEL"),
    ]
    assert "did you mean RAG_DATA_DIR?" in misspelt_settings(environ)[0].message()


@pytest.mark.unit
def test_settings_as_read_and_a_deployment_s_own_variables_are_left_alone() -> None:
    environ = {
        "RAG_DATA_DIR": "/srv/rag",
        "rag_default_top_k": "5",  # read: the settings take names in any case
        "RAG_RETRIEVER_TOKEN_FILE": "/run/reader.token",  # a client's (rag_client)
        "RAG_IMAGE": "rag:1.4",  # a deployment's own
        "RAG_PEER_TOKEN": "x",
        "PATH": "/usr/bin",
        "RAGE_DATA_DIR": "/x",  # not our prefix
    }
    assert misspelt_settings(environ) == []


@pytest.mark.unit
def test_every_known_name_is_one_no_other_known_name_is_taken_for_a_typo_of() -> None:
    """No setting is reported as a typo of another (the list is complete and
    the cutoff leaves real names alone)."""
    assert misspelt_settings(dict.fromkeys(KNOWN_SETTINGS, "1")) == []


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **extra}


@pytest.mark.integration
def test_the_cli_warns_before_it_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "services.operator.cli", "--addr", "127.0.0.1:9", "stats"],
        env=_env(RAG_INDEXER_ADRR="indexer:50051"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert (
        "warning: RAG_INDEXER_ADRR is not a setting any service reads; "
        "did you mean RAG_INDEXER_ADDR?"
    ) in done.stderr


@pytest.mark.integration
def test_a_service_logs_the_typo_at_start(tmp_path: Path) -> None:
    log_path = tmp_path / "gateway.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway"],
            env=_env(RAG_GATEWAY_PORT="0", RAG_LOG_JSON="true", RAG_GATEWAY_PUBLIC_ENABLE="true"),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        ends = time.monotonic() + 120
        while "setting_not_read" not in log_path.read_text() and process.poll() is None:
            assert time.monotonic() < ends, log_path.read_text()
            time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=60)
    text = log_path.read_text()
    assert '"variable": "RAG_GATEWAY_PUBLIC_ENABLE"' in text, text
    assert '"did_you_mean": "RAG_GATEWAY_PUBLIC_ENABLED"' in text, text


@pytest.mark.unit
def test_a_store_variable_with_the_prefix_is_named_with_the_one_read() -> None:
    """The store settings are read without RAG_ (POSTGRES_URL, QDRANT_API_KEY):
    the prefixed name, the most natural slip, resembled no RAG_ setting."""
    environ = {"RAG_QDRANT_API_KEY": "k", "RAG_OPENSEARCH_USER": "u"}
    assert misspelt_settings(environ) == [
        Misspelt("RAG_OPENSEARCH_USER", "OPENSEARCH_USER"),
        Misspelt("RAG_QDRANT_API_KEY", "QDRANT_API_KEY"),
    ]


@pytest.mark.unit
def test_a_name_with_a_word_left_out_or_added_is_named_with_the_settings_it_resembles() -> None:
    """Too short for the letter-by-letter ratio, these started the service on
    the defaults without a word: a closed gateway, a plaintext server (probe)."""
    environ = {
        "RAG_TLS_CERT": "/x",
        "RAG_GATEWAY_PUBLIC": "true",
        "RAG_GATEWAY_ORIGINS": "https://a",
        "RAG_DATA_DIRECTORY": "/srv",
        "RAG_IMAGE_TAG": "v1",  # a deployment's own: resembles nothing
    }
    assert {m.variable: m.meant for m in misspelt_settings(environ)} == {
        "RAG_TLS_CERT": "RAG_TLS_CERT_FILE",
        "RAG_GATEWAY_PUBLIC": "RAG_GATEWAY_PUBLIC_ENABLED or RAG_GATEWAY_PUBLIC_ORIGINS",
        "RAG_GATEWAY_ORIGINS": "RAG_GATEWAY_ALLOWED_ORIGINS or RAG_GATEWAY_PUBLIC_ORIGINS",
        "RAG_DATA_DIRECTORY": "RAG_DATA_DIR",
    }


@pytest.mark.unit
def test_a_service_name_read_under_another_is_named() -> None:
    environ = {"RAG_GATEWAY_HOST": "0.0.0.0", "RAG_PORT": "1"}
    assert {m.variable: m.meant for m in misspelt_settings(environ)} == {
        "RAG_GATEWAY_HOST": "RAG_HOST",
        "RAG_PORT": "RAG_INDEXER_PORT, RAG_RETRIEVER_PORT, RAG_RERANKER_PORT or RAG_GATEWAY_PORT",
    }
