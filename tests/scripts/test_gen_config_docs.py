"""docs/configuration.md lists exactly the variables the settings classes read."""

from __future__ import annotations

import pytest

from scripts.gen_config_docs import KNOWN_TARGET, TARGET, all_env_names, render, render_known

pytestmark = pytest.mark.unit


def test_configuration_doc_is_current() -> None:
    assert TARGET.read_text() == render(), "run `python scripts/gen_config_docs.py`"


def test_known_settings_module_is_current() -> None:
    assert KNOWN_TARGET.read_text() == render_known(), "run `python scripts/gen_config_docs.py`"


def test_well_known_variables_are_documented() -> None:
    names = all_env_names()
    for name in [
        "RAG_DATA_DIR",
        "QDRANT_URL",
        "OPENSEARCH_URL",
        "RAG_RETRIEVER_PORT",
        "RAG_RERANK_MODEL",
        "RAG_GATEWAY_PORT",
        "RAG_CHUNK_TARGET_CHARS",
    ]:
        assert name in names
