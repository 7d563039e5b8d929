"""GatewaySettings: fail-closed defaults, environment names, start-up errors."""

from __future__ import annotations

import pytest

from gateway.settings import GatewaySettings
from services.core.errors import ConfigError
from services.runtime.settings import load_settings

pytestmark = pytest.mark.unit


def test_defaults_are_closed_and_match_the_documented_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("RAG_GATEWAY_PUBLIC_ENABLED", "RAG_GATEWAY_PORT", "RAG_RETRIEVER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    for name in (
        "PUBLIC_ORIGINS",
        "FORWARDED_ALLOW_IPS",
        "DEBUG_REASONS",
        "MAX_JSON_DEPTH",
        "METRICS_ENABLED",
        "METRICS_HOST",
        "METRICS_PORT",
    ):
        monkeypatch.delenv(f"RAG_GATEWAY_{name}", raising=False)
    settings = load_settings(GatewaySettings)
    assert settings.gateway_public_enabled is False
    assert settings.gateway_allowed_origins == []
    assert settings.gateway_allow_missing_origin is False
    assert settings.gateway_query_log_retention == "none"
    assert settings.gateway_port == 8080
    assert settings.retriever_addr == "localhost:50052"
    assert settings.uses_redis is False
    assert settings.gateway_public_origins == []  # the loopback names at the gateway's port
    assert settings.trusted_proxies == ()  # X-Forwarded-For from nobody, not even loopback
    assert settings.gateway_debug_reasons is False
    assert settings.gateway_max_json_depth == 32
    assert settings.gateway_metrics_enabled is True
    assert (settings.gateway_metrics_host, settings.gateway_metrics_port) == ("127.0.0.1", 9464)


def test_reads_gateway_and_retriever_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_GATEWAY_PUBLIC_ENABLED", "true")
    monkeypatch.setenv("RAG_GATEWAY_PORT", "9090")
    monkeypatch.setenv("RAG_RETRIEVER_ADDR", "retriever:7000")
    monkeypatch.setenv(
        "RAG_GATEWAY_ALLOWED_ORIGINS", "https://Docs.Example/, http://localhost:3000"
    )
    monkeypatch.setenv("RAG_GATEWAY_REDIS_URL", "redis://cache:6379/1")
    settings = load_settings(GatewaySettings)
    assert settings.gateway_public_enabled is True
    assert settings.gateway_port == 9090
    assert settings.retriever_addr == "retriever:7000"
    assert settings.gateway_allowed_origins == ["https://docs.example", "http://localhost:3000"]
    assert settings.uses_redis is True


def test_reads_public_origins_and_trusted_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "RAG_GATEWAY_PUBLIC_ORIGINS", "https://Search.Example.com:443/, http://[::1]:8080"
    )
    monkeypatch.setenv("RAG_GATEWAY_FORWARDED_ALLOW_IPS", "10.0.0.0/8, 127.0.0.1,2001:db8::/32")
    settings = load_settings(GatewaySettings)
    assert settings.gateway_public_origins == ["https://search.example.com", "http://[::1]:8080"]
    assert settings.gateway_forwarded_allow_ips == ["10.0.0.0/8", "127.0.0.1/32", "2001:db8::/32"]
    assert [str(net) for net in settings.trusted_proxies] == settings.gateway_forwarded_allow_ips


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RAG_GATEWAY_RATE_LIMIT", "lots"),
        ("RAG_GATEWAY_DAILY_BUDGET", "0"),
        ("RAG_GATEWAY_MAX_TOP_K", "0"),
        ("RAG_GATEWAY_DEFAULT_TOP_K", "50"),
        ("RAG_GATEWAY_QUERY_LOG_RETENTION", "forever"),
        ("RAG_GATEWAY_REQUEST_DEADLINE_S", "-1"),
        ("RAG_GATEWAY_FORWARDED_ALLOW_IPS", "*"),
        ("RAG_GATEWAY_FORWARDED_ALLOW_IPS", "10.0.0.0/33"),
        ("RAG_GATEWAY_PUBLIC_ORIGINS", "search.example.com"),
        ("RAG_GATEWAY_PUBLIC_ORIGINS", "https://search.example.com/app"),
        ("RAG_GATEWAY_MAX_JSON_DEPTH", "2"),
        ("RAG_GATEWAY_MAX_JSON_DEPTH", "5000"),
        ("RAG_GATEWAY_METRICS_PORT", "70000"),
        ("RAG_GATEWAY_HEADER_TIMEOUT_S", "0"),
        ("RAG_GATEWAY_MAX_CONNECTIONS", "0"),
        ("RAG_GATEWAY_MAX_CONNECTIONS_PER_CLIENT", "2000"),  # above the total (1024)
        ("RAG_GATEWAY_RATE_LIMIT", "0/second"),  # every search a 429
        ("RAG_GATEWAY_ALLOWED_ORIGINS", "*"),  # never equals an Origin header
        ("RAG_GATEWAY_ALLOWED_ORIGINS", "https://docs.example/app"),
        ("RAG_RETRIEVER_ADDR", "localhost"),  # no port: a traceback at start-up before
        ("RAG_RETRIEVER_ADDR", "localhost:99999"),
        ("RAG_GATEWAY_REDIS_URL", "http://redis:6379/0"),
    ],
)
def test_bad_values_fail_at_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        load_settings(GatewaySettings)


def test_a_redis_url_refusal_does_not_repeat_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_GATEWAY_REDIS_URL", "http://:hunter2secret@redis:6379/0")
    with pytest.raises(ConfigError, match="RAG_GATEWAY_REDIS_URL") as refused:
        load_settings(GatewaySettings)
    assert "hunter2secret" not in str(refused.value)


def test_the_metrics_listener_cannot_share_the_gateway_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found only at bind time, and blamed on RAG_GATEWAY_PORT (probe)."""
    monkeypatch.setenv("RAG_GATEWAY_METRICS_PORT", "8080")
    with pytest.raises(ConfigError, match="RAG_GATEWAY_PORT and RAG_GATEWAY_METRICS_PORT"):
        load_settings(GatewaySettings)
    monkeypatch.setenv("RAG_GATEWAY_METRICS_ENABLED", "false")  # then nothing listens there
    assert load_settings(GatewaySettings).gateway_metrics_port == 8080


def test_a_public_gateway_no_caller_could_search_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every search was 403 origin_not_allowed, with or without an Origin (probe)."""
    monkeypatch.setenv("RAG_GATEWAY_PUBLIC_ENABLED", "true")
    monkeypatch.setenv("RAG_GATEWAY_ALLOW_SAME_ORIGIN", "false")
    with pytest.raises(ConfigError, match="no caller could search"):
        load_settings(GatewaySettings)
    monkeypatch.setenv("RAG_GATEWAY_ALLOW_MISSING_ORIGIN", "true")
    assert load_settings(GatewaySettings).gateway_public_enabled
