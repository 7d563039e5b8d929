"""ClientSettings, TlsSettings and RetryPolicy: a wrong value is refused when
the value is made, with a message naming the field (and, from the
environment, the variable)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from rag_client import ClientSettings, InvalidSettings, RetryPolicy, TlsSettings, transport
from tests.support.certs import Pki

pytestmark = pytest.mark.unit


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.create(tmp_path)


@pytest.fixture
def pem(pki: Pki) -> Path:
    """A real CA certificate (the files are parsed when the settings are made)."""
    return pki.ca_file


def refused(field: str, make: Any) -> str:
    with pytest.raises(InvalidSettings) as err:
        make()
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")
    return str(err.value)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("", "expected 'host:port'"),
        ("localhost", "not 'host:port'"),
        ("localhost:0", "port in 1..65535"),
        ("localhost:70000", "port in 1..65535"),
        ("local host:50052", "whitespace"),
        (":50052", "not 'host:port'"),
        # gRPC reads these as DNS names and fails on every call (probe).
        ("http://localhost:50052", "without http://"),
        ("https://r.internal:443", "without https://"),
        ("grpc://r.internal:443", "without grpc://"),
    ],
)
def test_a_target_that_is_not_host_and_port_is_refused(target: str, why: str) -> None:
    assert why in refused("target", lambda: ClientSettings(target=target))


@pytest.mark.parametrize("target", ["localhost:50052", "[::1]:50052", "dns:///r.internal:443"])
def test_targets_gRPC_understands_are_accepted(target: str) -> None:
    assert ClientSettings(target=target).target == target


@pytest.mark.parametrize(
    ("token", "why"),
    [("Bearer abc", "'Bearer ' is added"), ("a b", "without spaces"), ("abc\n", "printable")],
)
def test_a_malformed_token_is_refused(token: str, why: str) -> None:
    assert why in refused("token", lambda: ClientSettings("h:1", token=token))


def test_token_and_token_file_exclude_each_other_and_the_file_must_exist(
    tmp_path: Path, pem: Path
) -> None:
    both = refused("token_file", lambda: ClientSettings("h:1", token="t", token_file=pem))
    assert "not both" in both
    missing = tmp_path / "nope.token"
    assert str(missing) in refused("token_file", lambda: ClientSettings("h:1", token_file=missing))


def test_the_token_is_kept_out_of_repr() -> None:
    assert "s3cret" not in repr(ClientSettings("h:1", token="s3cret"))


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, "5", True])
def test_a_default_deadline_that_is_not_a_positive_number_is_refused(timeout: Any) -> None:
    refused("timeout", lambda: ClientSettings("h:1", timeout=timeout))


def test_tls_files_must_be_readable_and_a_client_cert_needs_its_key(
    tmp_path: Path, pem: Path, pki: Pki
) -> None:
    missing = tmp_path / "missing.pem"
    assert "not a readable file" in refused("tls.ca_file", lambda: TlsSettings(ca_file=missing))
    assert "tls.key_file" in refused("tls.cert_file", lambda: TlsSettings(cert_file=pem))
    refused("tls.key_file", lambda: TlsSettings(cert_file=pem, key_file=missing))
    refused("tls.server_name", lambda: TlsSettings(server_name="a b"))
    client = pki.issue("client")
    tls = TlsSettings(ca_file=pem, cert_file=client.cert, key_file=client.key, server_name="r")
    assert ClientSettings("h:1", tls=tls).tls == tls
    assert "TlsSettings" in refused("tls", lambda: ClientSettings("h:1", tls=str(pem)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_attempts": 0}, "retry.max_attempts"),
        ({"max_attempts": 11}, "retry.max_attempts"),
        ({"max_attempts": 2.0}, "retry.max_attempts"),
        ({"max_attempts": True}, "retry.max_attempts"),
        ({"initial_backoff": 0}, "retry.initial_backoff"),
        ({"initial_backoff": 1.0, "max_backoff": 0.5}, "retry.max_backoff"),
        ({"multiplier": 0.5}, "retry.multiplier"),
        ({"jitter": 1.5}, "retry.jitter"),
        ({"jitter": -0.1}, "retry.jitter"),
    ],
)
def test_a_retry_policy_out_of_bounds_is_refused(fields: dict[str, Any], field: str) -> None:
    refused(field, lambda: RetryPolicy(**fields))


def test_channel_options_must_be_name_value_pairs() -> None:
    refused("channel_options", lambda: ClientSettings("h:1", channel_options=("grpc.x",)))  # type: ignore[arg-type]


def test_tls_files_are_parsed_when_the_settings_are_made(tmp_path: Path, pki: Pki) -> None:
    """A garbage CA or a certificate with another's key was accepted, then every
    call failed after four retries as "Connection refused" (probe)."""
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n")
    assert "not a PEM certificate bundle" in refused(
        "tls.ca_file", lambda: TlsSettings(ca_file=garbage)
    )
    mine, theirs = pki.issue("mine"), pki.issue("theirs")
    why = refused("tls.cert_file", lambda: TlsSettings(cert_file=mine.cert, key_file=theirs.key))
    assert "key values mismatch" in why
    assert "not a PEM" in refused(
        "tls.cert_file", lambda: TlsSettings(cert_file=garbage, key_file=mine.key)
    )


def test_invalid_settings_is_also_a_value_error() -> None:
    with pytest.raises(ValueError, match="retry: expected a RetryPolicy"):
        ClientSettings("h:1", retry={"max_attempts": 2})  # type: ignore[arg-type]


def test_from_env_reads_the_variables_the_services_read(pem: Path) -> None:
    environ = {
        "RAG_RETRIEVER_ADDR": "r.internal:50052",
        "RAG_RETRIEVER_TLS_CA_FILE": str(pem),
        "RAG_RETRIEVER_TLS_SERVER_NAME": "retriever.rag",
        "RAG_RETRIEVER_TOKEN": "tok-123",
    }
    settings = ClientSettings.from_env("retriever", environ, timeout=2.5)
    assert settings.target == "r.internal:50052" and settings.timeout == 2.5
    assert settings.tls == TlsSettings(ca_file=pem, server_name="retriever.rag")
    assert settings.token == "tok-123"
    plain = ClientSettings.from_env("indexer", {})
    assert plain.target == "localhost:50051" and plain.tls is None and not plain.token


def test_from_env_errors_name_the_variable(tmp_path: Path) -> None:
    environ = {"RAG_RETRIEVER_TLS_CA_FILE": str(tmp_path / "gone.pem")}
    message = refused("tls.ca_file", lambda: ClientSettings.from_env("retriever", environ))
    assert "RAG_RETRIEVER_TLS_CA_FILE" in message
    flag = {"RAG_INDEXER_TLS": "maybe"}
    assert "RAG_INDEXER_TLS='maybe'" in refused(
        "tls", lambda: ClientSettings.from_env("indexer", flag)
    )
    bad_addr = {"RAG_INDEXER_ADDR": "indexer"}
    assert "RAG_INDEXER_ADDR" in refused(
        "target", lambda: ClientSettings.from_env("indexer", bad_addr)
    )
    refused("service", lambda: ClientSettings.from_env("gateway", {}))


def test_the_channel_reconnects_on_the_retry_policys_schedule_unless_told_otherwise() -> None:
    policy = RetryPolicy(initial_backoff=0.05, max_backoff=0.8)
    options = dict(transport._options(ClientSettings("h:1", retry=policy)))
    assert options["grpc.initial_reconnect_backoff_ms"] == 50
    assert options["grpc.max_reconnect_backoff_ms"] == 800
    own = (("grpc.max_reconnect_backoff_ms", 5000), ("grpc.primary_user_agent", "svc/1"))
    options = dict(transport._options(ClientSettings("h:1", retry=policy, channel_options=own)))
    assert options["grpc.max_reconnect_backoff_ms"] == 5000
    assert options["grpc.primary_user_agent"] == "svc/1"


def test_a_client_takes_settings_or_a_target() -> None:
    from rag_client import RetrieverClient

    with RetrieverClient("localhost:50052") as client:
        assert client.settings == ClientSettings("localhost:50052")
    refused("settings", lambda: RetrieverClient({"target": "h:1"}))  # type: ignore[arg-type]
    refused("target", lambda: RetrieverClient("nowhere"))
