"""scripts/dev_secrets.py makes what deploy/docker-compose.yml mounts: a CA,
a certificate per service, tokens and a callers file that knows them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cryptography import x509

from scripts import dev_secrets
from services.runtime.security.callers import Role, load_callers_text

pytestmark = pytest.mark.unit

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_it_writes_every_file_compose_mounts(tmp_path: Path) -> None:
    assert dev_secrets.main([str(tmp_path)]) == 0
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    for secret in compose["secrets"].values():
        assert (tmp_path / secret["file"].removeprefix("./secrets/")).is_file(), secret


def test_tokens_map_to_their_callers_and_rerunning_keeps_them(tmp_path: Path) -> None:
    dev_secrets.main([str(tmp_path)])
    token = (tmp_path / "tokens" / "gateway.token").read_text()
    ca = (tmp_path / "ca.pem").read_bytes()
    dev_secrets.main([str(tmp_path)])
    assert (tmp_path / "tokens" / "gateway.token").read_text() == token
    assert (tmp_path / "ca.pem").read_bytes() == ca
    registry = load_callers_text((tmp_path / "callers.toml").read_text(), "callers.toml")
    expected = {"gateway": Role.READER, "retriever": Role.READER, "cli": Role.WRITER}
    for name, role in {**expected, "ops": Role.ADMIN}.items():
        caller = registry.by_token((tmp_path / "tokens" / f"{name}.token").read_text())
        assert caller is not None and caller.name == name and role in caller.roles
    assert token.strip() not in (tmp_path / "callers.toml").read_text()


def test_service_certificates_name_the_compose_service(tmp_path: Path) -> None:
    dev_secrets.main([str(tmp_path)])
    cert = x509.load_pem_x509_certificate((tmp_path / "retriever.pem").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "retriever" in names.get_values_for_type(x509.DNSName)
