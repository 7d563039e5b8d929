"""Reranker settings: environment names, defaults and validation."""

from __future__ import annotations

import pytest

from services.core.errors import ConfigError
from services.reranker.settings import DEFAULT_MODEL, RerankerSettings
from services.runtime.settings import load_settings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(RerankerSettings.model_fields):
        monkeypatch.delenv(f"RAG_{name.upper()}", raising=False)


def test_defaults() -> None:
    settings = load_settings(RerankerSettings)
    assert settings.reranker_port == 50053
    assert settings.rerank_model == DEFAULT_MODEL == "packaged:ms-marco-MiniLM-L-12-v2"
    # The packaged model ships as an int8 ONNX graph: that is its backend.
    assert (settings.rerank_backend, settings.rerank_device) == ("onnx-int8", "cpu")
    assert (settings.rerank_max_length, settings.rerank_batch_size) == (128, 8)
    assert (settings.rerank_max_passages, settings.rerank_max_passage_chars) == (64, 2000)
    assert settings.rerank_activation == "none"


def test_variables_read_naturally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_RERANKER_PORT", "6000")
    monkeypatch.setenv("RAG_RERANK_MODEL", "/models/my-cross-encoder")
    monkeypatch.setenv("RAG_RERANK_BACKEND", "onnx-int8")
    monkeypatch.setenv("RAG_RERANK_ACTIVATION", "sigmoid")
    monkeypatch.setenv("RAG_RERANK_BATCH_SIZE", "4")
    monkeypatch.setenv("RAG_RERANK_ONNX_SPIN", "true")
    settings = load_settings(RerankerSettings)
    assert settings.reranker_port == 6000
    assert settings.rerank_model == "/models/my-cross-encoder"
    assert settings.rerank_backend == "onnx-int8"
    assert settings.rerank_activation == "sigmoid"
    assert settings.rerank_batch_size == 4
    assert settings.rerank_onnx_spin is True


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RAG_RERANK_BACKEND", "tensorrt"),
        ("RAG_RERANK_ACTIVATION", "softmax"),
        ("RAG_RERANK_BATCH_SIZE", "0"),
        ("RAG_RERANK_MAX_LENGTH", "4"),
        ("RAG_RERANK_DEVICE", "gpu"),
        ("RAG_RERANK_MAX_PASSAGES", "-1"),
        ("RAG_RERANKER_PORT", "70000"),
    ],
)
def test_bad_value_is_named(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as raised:
        load_settings(RerankerSettings)
    assert f"{variable}={value!r}" in str(raised.value)


def test_onnx_on_a_gpu_device_is_contradictory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_RERANK_MODEL", "/models/my-cross-encoder")
    monkeypatch.setenv("RAG_RERANK_BACKEND", "onnx")
    monkeypatch.setenv("RAG_RERANK_DEVICE", "cuda")
    with pytest.raises(ConfigError, match=r"RAG_RERANK_DEVICE='cuda'.*RAG_RERANK_BACKEND=onnx"):
        load_settings(RerankerSettings)


def test_a_hub_or_folder_model_keeps_the_torch_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_RERANK_MODEL", "/models/my-cross-encoder")
    assert load_settings(RerankerSettings).rerank_backend == "torch"


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_the_packaged_model_refuses_another_backend(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("RAG_RERANK_BACKEND", backend)
    with pytest.raises(ConfigError, match="ships as an int8 ONNX graph"):
        load_settings(RerankerSettings)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RAG_RERANK_MODEL", "packaged:nope", "RAG_RERANK_MODEL=packaged:nope is not a packaged"),
        ("RAG_RERANK_MODEL", "  ", "RAG_RERANK_MODEL is blank"),
        ("RAG_RERANK_SAFETY_MARGIN_MS", "10000", "must be less than RAG_RERANK_DEFAULT_DEADLINE"),
    ],
)
def test_a_model_or_margin_that_cannot_serve_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    """Refused before anything loads (exit status 2), not a process that stays
    NOT_SERVING for good."""
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAG_RERANK_DEFAULT_DEADLINE_MS", "5000")
    with pytest.raises(ConfigError, match=message):
        load_settings(RerankerSettings)


def test_an_upper_case_packaged_prefix_names_the_packaged_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_RERANK_MODEL", "PACKAGED:ms-marco-MiniLM-L-12-v2")
    settings = load_settings(RerankerSettings)
    assert (settings.rerank_model, settings.rerank_backend) == (DEFAULT_MODEL, "onnx-int8")


@pytest.mark.parametrize("variable", ["RAG_RERANK_MODEL_CACHE", "RAG_RERANK_CACHE_DIR"])
def test_a_blank_folder_is_refused_not_read_as_the_working_folder(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """A blank model cache became Path("."): the packaged model was looked for
    there, and the service started NOT_SERVING for good (probe)."""
    monkeypatch.setenv(variable, " ")
    with pytest.raises(ConfigError, match=f"{variable} is blank"):
        load_settings(RerankerSettings)
