"""Embedding settings: shared by the Indexer and the Retriever, validated at
start-up with the variable and the value in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.indexer.settings import IndexerSettings
from services.retriever.settings import RetrieverSettings
from services.runtime.embedding_settings import EmbeddingSettings
from services.runtime.settings import load_settings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (IndexerSettings, RetrieverSettings):
        for name in cls.model_fields:
            monkeypatch.delenv(f"RAG_{name.upper()}", raising=False)


def test_defaults_pick_the_backend_automatically_and_batch_queries() -> None:
    retriever = load_settings(RetrieverSettings)
    assert (retriever.embedding_backend, retriever.embedding_threads) == ("auto", 0)
    assert retriever.embedding_cache_dir is None and not retriever.embedding_onnx_spin
    assert retriever.query_max_batch == 32


def test_both_services_read_the_same_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_BACKEND", "onnx")
    monkeypatch.setenv("RAG_EMBEDDING_THREADS", "1")
    monkeypatch.setenv("RAG_EMBEDDING_CACHE_DIR", "/var/cache/rag")
    for cls in (IndexerSettings, RetrieverSettings):
        settings: EmbeddingSettings = load_settings(cls)
        assert settings.embedding_backend == "onnx"
        assert settings.embedding_threads == 1
        assert settings.embedding_cache_dir == Path("/var/cache/rag")


@pytest.mark.parametrize(
    ("variable", "value", "cls"),
    [
        ("RAG_EMBEDDING_BACKEND", "onnx-int8", IndexerSettings),
        ("RAG_EMBEDDING_THREADS", "-1", RetrieverSettings),
        ("RAG_QUERY_MAX_BATCH", "0", RetrieverSettings),
        ("RAG_QUERY_MAX_BATCH", "many", RetrieverSettings),
    ],
)
def test_bad_values_name_the_variable_and_the_value(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, cls: type[EmbeddingSettings]
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=f"{variable}='{value}'"):
        load_settings(cls)


def test_declared_languages_are_codes_or_a_star(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.runtime.embedding_settings import declared_languages

    # Unset: the model's own declaration (services.embedding.packaged_models).
    assert load_settings(RetrieverSettings).embedding_languages == ""
    assert declared_languages("") == frozenset()
    monkeypatch.setenv("RAG_EMBEDDING_LANGUAGES", "en, ZH")
    assert declared_languages(load_settings(RetrieverSettings).embedding_languages) == {"en", "zh"}
    monkeypatch.setenv("RAG_EMBEDDING_LANGUAGES", "english;chinese")
    with pytest.raises(ConfigError, match="RAG_EMBEDDING_LANGUAGES"):
        load_settings(RetrieverSettings)


@pytest.mark.parametrize("cls", [IndexerSettings, RetrieverSettings])
@pytest.mark.parametrize(
    ("variable", "field"),
    [
        ("RAG_EMBEDDING_DOCUMENT_PRECISION", "embedding_document_precision"),
        ("RAG_EMBEDDING_QUERY_PRECISION", "embedding_query_precision"),
    ],
)
def test_int8_on_the_torch_backend_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, cls: type[EmbeddingSettings], variable: str, field: str
) -> None:
    monkeypatch.setenv(variable, "int8")
    monkeypatch.setenv("RAG_EMBEDDING_BACKEND", "torch")
    with pytest.raises(ConfigError) as refused:
        load_settings(cls)
    message = str(refused.value)
    assert f"{variable}=int8" in message
    assert "RAG_EMBEDDING_BACKEND=torch" in message
    for backend in ("auto", "onnx"):  # the backends that can run it
        monkeypatch.setenv("RAG_EMBEDDING_BACKEND", backend)
        assert getattr(load_settings(cls), field) == "int8"


def test_queries_are_fp32_unless_set() -> None:
    assert load_settings(RetrieverSettings).embedding_query_precision == "fp32"


def test_document_precision_reaches_the_indexer_embedder_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The Indexer's setting decides; a Retriever alone embeds queries only
    (no int8 export to build), and in one process the two need not agree."""
    from services.indexer.app import indexer_parts
    from services.retriever.app import retriever_parts
    from services.stack.embedded import stack_parts

    assert load_settings(IndexerSettings).embedding_document_precision == "auto"
    monkeypatch.setenv("RAG_EMBEDDING_DOCUMENT_PRECISION", "int8")
    indexer, retriever = load_settings(IndexerSettings), load_settings(RetrieverSettings)
    assert indexer_parts(indexer).embedder_config(tmp_path).document_precision == "int8"
    assert retriever_parts(retriever).embedder_config(tmp_path).document_precision == "fp32"
    fp32_retriever = load_settings(RetrieverSettings, embedding_document_precision="fp32")
    config = stack_parts(indexer, fp32_retriever).embedder_config(tmp_path)
    assert config.document_precision == "int8"


def test_index_work_nice_reaches_the_document_encoder_and_the_run_threads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """RAG_INDEX_WORK_NICE (default 10) lowers the Indexer's document encoder,
    alone or in the stack; a Retriever alone encodes no documents."""
    from services.indexer.app import indexer_parts
    from services.retriever.app import retriever_parts
    from services.stack.embedded import stack_parts

    indexer, retriever = load_settings(IndexerSettings), load_settings(RetrieverSettings)
    assert indexer.index_work_nice == 10
    assert indexer_parts(indexer).embedder_config(tmp_path).document_nice == 10
    assert retriever_parts(retriever).embedder_config(tmp_path).document_nice == 0
    monkeypatch.setenv("RAG_INDEX_WORK_NICE", "0")
    unlowered = load_settings(IndexerSettings)
    assert stack_parts(unlowered, retriever).embedder_config(tmp_path).document_nice == 0
    monkeypatch.setenv("RAG_INDEX_WORK_NICE", "20")
    with pytest.raises(ConfigError, match="RAG_INDEX_WORK_NICE"):
        load_settings(IndexerSettings)


def test_packaged_models_declare_their_languages() -> None:
    from services.embedding.packaged_models import model_languages

    assert model_languages("packaged:all-MiniLM-L6-v2") == {"en"}
    assert model_languages("") == {"en"}  # the legacy name of the packaged MiniLM
    assert model_languages("packaged:multilingual-e5-small") == {"*"}
    assert model_languages("/models/any-folder") == {"en"}  # unknown: the safe side


def test_an_unknown_packaged_alias_names_the_known_ones() -> None:
    from services.embedding.packaged_models import model_path

    with pytest.raises(ConfigError, match="packaged:multilingual-e5-small"):
        model_path("packaged:e5-large")


@pytest.mark.parametrize(("cpu_flag", "precision"), [("avx512_vnni", "int8"), ("", "fp32")])
def test_auto_document_precision_follows_the_cpu_in_the_indexer_and_the_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpu_flag: str, precision: str
) -> None:
    """`auto` is resolved once, where the Indexer's parts are configured, and
    says why. The CPU reading is replaced (a fake: this machine has one CPU)."""
    import structlog

    from services.indexer.app import indexer_parts
    from services.runtime import parts
    from services.stack.embedded import stack_parts

    monkeypatch.setattr(parts, "int8_dot_product", lambda: cpu_flag)
    indexer, retriever = load_settings(IndexerSettings), load_settings(RetrieverSettings)
    with structlog.testing.capture_logs() as logs:
        assert indexer_parts(indexer).embedder_config(tmp_path).document_precision == precision
        assert stack_parts(indexer, retriever).embedder_config(tmp_path).document_precision == (
            precision
        )
    [chosen, _] = [line for line in logs if line["event"] == "document_precision_chosen"]
    assert (chosen["setting"], chosen["precision"]) == ("auto", precision)
    assert (cpu_flag or "no int8 dot-product") in chosen["reason"]


def test_a_blank_model_is_refused_not_read_as_the_old_english_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`RAG_EMBEDDING_MODEL=` loaded all-MiniLM-L6-v2 (the name an index
    recorded before models had a prefix) into a new index (probe)."""
    monkeypatch.setenv("RAG_EMBEDDING_MODEL", " ")
    with pytest.raises(ConfigError, match=r"RAG_EMBEDDING_MODEL.*blank.*multilingual-e5-small"):
        load_settings(RetrieverSettings)


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("RAG_EMBEDDING_MODEL", "PACKAGED:multilingual-e5-small", "embedding_model", None),
        ("RAG_CROSS_LINGUAL_MODEL", "none", "cross_lingual_model", ""),
        ("RAG_CROSS_LINGUAL_MODEL", " Off ", "cross_lingual_model", ""),
        ("RAG_EMBEDDING_CACHE_DIR", "", "embedding_cache_dir", None),
        ("RAG_EMBEDDING_CACHE_DIR", "~/models", "embedding_cache_dir", "HOME/models"),
    ],
)
def test_spellings_an_operator_means_are_read_as_meant(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    variable: str,
    value: str,
    field: str,
    expected: str | None,
) -> None:
    """A blank cache folder became Path("."): 457 MB of model export in the
    working folder; `PACKAGED:` and `none` were hub names (probe)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(variable, value)
    got = getattr(load_settings(IndexerSettings), field)
    if field == "embedding_model":
        assert got == "packaged:multilingual-e5-small"
    elif expected is not None and expected.startswith("HOME/"):
        assert got == tmp_path / expected.removeprefix("HOME/")
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("RAG_RETRIEVER_PORT", "-1", "(a number from 0 to 65535)"),
        ("RAG_SHUTDOWN_GRACE_S", "nan", "Input should be a finite number"),
        ("RAG_QUERY_CACHE_SIZE", str(2**64), "(a number from 0 to 1e+06)"),
        ("RAG_LOG_LEVEL", "verbose", "not one of DEBUG, INFO, WARNING, ERROR"),
        ("RAG_FUSION", "x" * 5000, "... (5000 characters)"),
    ],
)
def test_a_refused_value_gets_a_message_an_operator_can_act_on(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    """Only the crossed bound was named (a NaN: "less than or equal to 120"),
    unbounded counts took 2**64, `info` was refused, and a 100,000-character
    value was repeated whole (probe)."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as refused:
        load_settings(RetrieverSettings)
    assert expected in str(refused.value) and len(str(refused.value)) < 600


@pytest.mark.parametrize(("value", "level"), [("info", "INFO"), ("Warn", "WARNING")])
def test_log_levels_are_read_in_any_case(
    monkeypatch: pytest.MonkeyPatch, value: str, level: str
) -> None:
    monkeypatch.setenv("RAG_LOG_LEVEL", value)
    assert load_settings(RetrieverSettings).log_level == level


def test_the_second_model_cannot_be_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_CROSS_LINGUAL_MODEL", "packaged:multilingual-e5-small")
    with pytest.raises(ConfigError, match="RAG_CROSS_LINGUAL_MODEL is RAG_EMBEDDING_MODEL"):
        load_settings(IndexerSettings)
