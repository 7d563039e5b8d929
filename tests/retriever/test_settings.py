"""The Reranker's address is checked when the Retriever starts, by the rule
its client applies, not on the first call."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.embedding.packaged_models import DEFAULT_RERANKER
from services.retriever.fusion import FITTED_RERANK, FITTED_RERANK_BLEND, FITTED_SECOND_WEIGHT
from services.retriever.settings import RetrieverSettings

COLBERT = "packaged:answerai-colbert-small-v1"

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("addr", ["reranker", "reranker:0", "reranker:port", "re ranker:50053"])
def test_a_malformed_reranker_address_is_refused_naming_the_variable(addr: str) -> None:
    with pytest.raises(ValidationError, match="RAG_RERANKER_ADDR"):
        RetrieverSettings(reranker_addr=addr)


@pytest.mark.parametrize("addr", ["", "reranker:50053", "dns:///reranker.rag:50053"])
def test_an_address_the_client_takes_or_none_is_accepted(addr: str) -> None:
    assert RetrieverSettings(reranker_addr=addr).reranker_addr == addr


def test_the_rerank_rule_and_languages_follow_the_served_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RAG_RERANK_MODEL, read by the Reranker too, brings that model's fitted
    rule: ColBERT's scores are not logits, so the cross-encoder's gate would
    be meaningless for it."""
    for name in RetrieverSettings.model_fields:
        monkeypatch.delenv(f"RAG_{name.upper()}", raising=False)
    default = RetrieverSettings()
    assert default.rerank_model == DEFAULT_RERANKER
    assert (default.rerank_candidates, default.rerank_gate_margin) == (
        FITTED_RERANK[DEFAULT_RERANKER].candidates,
        FITTED_RERANK_BLEND.gate,
    )
    monkeypatch.setenv("RAG_RERANK_MODEL", COLBERT)
    colbert = RetrieverSettings()
    fitted = FITTED_RERANK[COLBERT]
    assert colbert.rerank_candidates == fitted.candidates
    assert (colbert.rerank_fused_weight, colbert.rerank_blend_k, colbert.rerank_gate_margin) == (
        fitted.blend.fused_weight,
        fitted.blend.k,
        fitted.blend.gate,
    )
    assert colbert.rerank_languages == "en"
    monkeypatch.setenv("RAG_RERANK_GATE_MARGIN", "0.75")  # a setting still wins
    assert RetrieverSettings().rerank_gate_margin == 0.75


def test_a_model_without_a_fitted_rule_gets_the_cross_encoders() -> None:
    settings = RetrieverSettings(rerank_model="/models/my-cross-encoder")
    assert settings.rerank_candidates == FITTED_RERANK[DEFAULT_RERANKER].candidates
    assert settings.rerank_gate_margin == FITTED_RERANK_BLEND.gate
    assert settings.rerank_languages == "en"


def test_the_second_model_brings_its_fitted_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    """RAG_CROSS_LINGUAL_MODEL, read by the Indexer too, brings that model's
    fitted RRF weight; mUSE, auto and any other model keep 1; a setting wins."""
    for name in RetrieverSettings.model_fields:
        monkeypatch.delenv(f"RAG_{name.upper()}", raising=False)
    assert RetrieverSettings().cross_lingual_weight == 1.0  # auto
    assert RetrieverSettings(cross_lingual_model="packaged:muse-v3").cross_lingual_weight == 1.0
    monkeypatch.setenv("RAG_CROSS_LINGUAL_MODEL", "packaged:bge-small-en")
    assert (
        RetrieverSettings().cross_lingual_weight
        == FITTED_SECOND_WEIGHT["packaged:bge-small-en"]
        == 4.0
    )
    monkeypatch.setenv("RAG_CROSS_LINGUAL_WEIGHT", "2.5")
    assert RetrieverSettings().cross_lingual_weight == 2.5


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"default_top_k": 60, "max_top_k": 50}, "RAG_DEFAULT_TOP_K must not exceed RAG_MAX_TOP_K"),
        (
            {"candidates_per_channel": 500, "max_candidates_per_channel": 200},
            "RAG_CANDIDATES_PER_CHANNEL must not exceed RAG_MAX_CANDIDATES_PER_CHANNEL",
        ),
        (
            {"safety_margin_ms": 1000, "default_deadline_ms": 50},
            "RAG_SAFETY_MARGIN_MS must be less than RAG_DEFAULT_DEADLINE_MS",
        ),
        ({"health_check_interval_s": 1e-9}, "health_check_interval_s"),
        (
            {"max_query_chars": 100_000, "max_raw_query_chars": 1000},
            "RAG_MAX_QUERY_CHARS must not exceed RAG_MAX_RAW_QUERY_CHARS",
        ),
        (
            {"rerank_fused_weight": 0, "rerank_score_weight": 0},
            "RAG_RERANK_FUSED_WEIGHT and RAG_RERANK_SCORE_WEIGHT are both 0",
        ),
    ],
)
def test_defaults_beyond_their_limits_are_refused_at_start(
    values: dict[str, float], message: str
) -> None:
    """A default over its own limit refused every request that left the field
    unset (`top_k: 0 is outside 1..50`, naming a field the caller never sent)."""
    with pytest.raises(ValidationError, match=message):
        RetrieverSettings(**values)  # type: ignore[arg-type]


def test_defaults_at_their_limits_are_accepted() -> None:
    settings = RetrieverSettings(default_top_k=50, max_top_k=50, health_check_interval_s=0.1)
    assert (settings.default_top_k, settings.health_check_interval_s) == (50, 0.1)


def test_a_refused_secret_is_not_repeated_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-up refusal goes to logs and terminals: it names the variable
    and the rule, never the key itself."""
    from services.core.errors import ConfigError
    from services.runtime.settings import load_settings

    monkeypatch.setenv("RAG_PAGE_TOKEN_KEY", "short-but-secret-key")
    with pytest.raises(ConfigError, match="RAG_PAGE_TOKEN_KEY") as refused:
        load_settings(RetrieverSettings)
    assert "short-but-secret-key" not in str(refused.value)


def test_a_packaged_reranker_name_is_read_as_the_reranker_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unknown packaged name quietly got the cross-encoder's fitted rule,
    while the Reranker refused it; `PACKAGED:` was another model (probe)."""
    from services.core.errors import ConfigError
    from services.runtime.settings import load_settings

    monkeypatch.setenv("RAG_RERANK_MODEL", "packaged:nonexistent")
    with pytest.raises(ConfigError, match="is not a packaged model: known are"):
        load_settings(RetrieverSettings)
    monkeypatch.setenv("RAG_RERANK_MODEL", "PACKAGED:answerai-colbert-small-v1")
    settings = load_settings(RetrieverSettings)
    colbert = FITTED_RERANK["packaged:answerai-colbert-small-v1"]
    assert settings.rerank_model == "packaged:answerai-colbert-small-v1"
    assert settings.rerank_candidates == colbert.candidates


def test_a_page_token_key_of_spaces_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.core.errors import ConfigError
    from services.runtime.settings import load_settings

    monkeypatch.setenv("RAG_PAGE_TOKEN_KEY", " " * 40)
    with pytest.raises(ConfigError, match="RAG_PAGE_TOKEN_KEY: at least 32 characters"):
        load_settings(RetrieverSettings)
