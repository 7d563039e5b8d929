"""A service's TLS files parsed when its settings load (probe, 2026-12-06: a
garbage client CA or a certificate with another's key failed the bind after
the model loaded, as `cannot listen on host:port`, naming neither file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.reranker.settings import RerankerSettings
from services.runtime.settings import load_settings
from tests.support.certs import Pki

pytestmark = pytest.mark.unit


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.create(tmp_path)


def test_valid_files_load(pki: Pki) -> None:
    settings = load_settings(RerankerSettings, **pki.server_settings(require_client_cert=True))
    assert settings.tls_require_client_cert


def test_a_certificate_with_another_certificates_key_is_named(pki: Pki) -> None:
    server, other = pki.server(), pki.issue("other")
    with pytest.raises(ConfigError, match=r"RAG_TLS_CERT_FILE / RAG_TLS_KEY_FILE: .*mismatch"):
        load_settings(RerankerSettings, tls_cert_file=server.cert, tls_key_file=other.key)


def test_a_client_ca_that_is_not_pem_is_named(pki: Pki, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("garbage\n")
    fields = pki.server_settings(require_client_cert=True) | {"tls_client_ca_file": garbage}
    with pytest.raises(ConfigError, match="RAG_TLS_CLIENT_CA_FILE: not a PEM certificate"):
        load_settings(RerankerSettings, **fields)
