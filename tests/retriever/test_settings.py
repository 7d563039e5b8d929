"""The Reranker's address is checked when the Retriever starts, by the rule
its client applies, not on the first call."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.retriever.settings import RetrieverSettings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("addr", ["reranker", "reranker:0", "reranker:port", "re ranker:50053"])
def test_a_malformed_reranker_address_is_refused_naming_the_variable(addr: str) -> None:
    with pytest.raises(ValidationError, match="RAG_RERANKER_ADDR"):
        RetrieverSettings(reranker_addr=addr)


@pytest.mark.parametrize("addr", ["", "reranker:50053", "dns:///reranker.rag:50053"])
def test_an_address_the_client_takes_or_none_is_accepted(addr: str) -> None:
    assert RetrieverSettings(reranker_addr=addr).reranker_addr == addr


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


def test_a_page_token_key_of_spaces_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.core.errors import ConfigError
    from services.runtime.settings import load_settings

    monkeypatch.setenv("RAG_PAGE_TOKEN_KEY", " " * 40)
    with pytest.raises(ConfigError, match="RAG_PAGE_TOKEN_KEY: at least 32 characters"):
        load_settings(RetrieverSettings)
