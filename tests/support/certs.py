"""Certificates made at test time with trustme (a maintained library; no
openssl shell-outs): one CA, a server certificate for localhost/127.0.0.1 and
client certificates by name, written as PEM files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


@dataclass
class Pki:
    directory: Path
    ca: trustme.CA

    @classmethod
    def create(cls, directory: Path) -> Pki:
        pki = cls(directory, trustme.CA(organization_name="rag-tests"))
        pki.ca.cert_pem.write_to_path(str(pki.ca_file))
        return pki

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    def issue(self, name: str, *extra_names: str) -> CertPair:
        """A leaf certificate (usable by servers and clients) for `name`."""
        leaf = self.ca.issue_cert(name, *extra_names, common_name=name)
        pair = CertPair(self.directory / f"{name}.pem", self.directory / f"{name}.key")
        leaf.private_key_pem.write_to_path(str(pair.key))
        pem = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
        pair.cert.write_bytes(pem)
        return pair

    def server(self) -> CertPair:
        return self.issue("localhost", "127.0.0.1")

    def server_settings(self, *, require_client_cert: bool) -> dict[str, object]:
        """Fields of BaseServiceSettings for a TLS (or mutual TLS) server."""
        pair = self.server()
        fields: dict[str, object] = {"tls_cert_file": pair.cert, "tls_key_file": pair.key}
        if require_client_cert:
            fields |= {"tls_client_ca_file": self.ca_file, "tls_require_client_cert": True}
        return fields
