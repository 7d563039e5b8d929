"""The ranking settings (services.retriever.settings_ranking) follow the
models served: the reranking model brings its fitted blend and languages,
the second vector's model its fitted weight; a setting still wins. Read
through RetrieverSettings, as every Retriever reads them."""

from __future__ import annotations

import pytest

from services.embedding.packaged_models import DEFAULT_RERANKER
from services.retriever.fusion import FITTED_RERANK, FITTED_RERANK_BLEND, FITTED_SECOND_WEIGHT
from services.retriever.settings import RetrieverSettings

COLBERT = "packaged:answerai-colbert-small-v1"

pytestmark = pytest.mark.unit


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
