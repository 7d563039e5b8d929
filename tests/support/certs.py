"""Certificates made at test time with trustme (a maintained library; no
openssl shell-outs): one CA, a server certificate for localhost/127.0.0.1 and
client certificates by name, written as PEM files."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


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

    def issue_named(
        self, file_name: str, common_name: str, alternative: list[x509.GeneralName]
    ) -> CertPair:
        """A client certificate with exactly these names (trustme reads every
        identity as a DNS name, IP address or e-mail address by its form)."""
        ca_key = serialization.load_pem_private_key(self.ca.private_key_pem.bytes(), None)
        ca_cert = x509.load_pem_x509_certificate(self.ca.cert_pem.bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        )
        if alternative:
            builder = builder.add_extension(x509.SubjectAlternativeName(alternative), False)
        cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        pair = CertPair(self.directory / f"{file_name}.pem", self.directory / f"{file_name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
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
