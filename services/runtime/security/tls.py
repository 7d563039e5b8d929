"""TLS credentials for our gRPC servers and for the clients that call them.

Certificates are read once at start-up; rotating a certificate is a rolling
restart (tokens, by contrast, rotate live: see caller_source)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from services.core.errors import ConfigError


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what}={path}: cannot read: {exc.strerror}") from None


@dataclass(frozen=True)
class ServerTls:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None  # set: client certificates are checked
    require_client_cert: bool = False

    def credentials(self) -> grpc.ServerCredentials:
        pair = (
            _read(self.key_file, "RAG_TLS_KEY_FILE"),
            _read(self.cert_file, "RAG_TLS_CERT_FILE"),
        )
        ca = _read(self.client_ca_file, "RAG_TLS_CLIENT_CA_FILE") if self.client_ca_file else None
        return grpc.ssl_server_credentials(
            [pair], root_certificates=ca, require_client_auth=self.require_client_cert
        )


@dataclass(frozen=True)
class ClientTls:
    """How a client checks the server (CA) and, for mTLS, who it is (cert/key).
    `server_name` overrides the name checked against the server certificate,
    e.g. when dialling an IP address."""

    ca_file: Path | None = None  # None: the system's trust store
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""
    setting_prefix: str = "RAG_"  # names the settings in error messages

    def credentials(self) -> grpc.ChannelCredentials:
        p = self.setting_prefix
        ca = _read(self.ca_file, f"{p}TLS_CA_FILE") if self.ca_file else None
        key = _read(self.key_file, f"{p}TLS_KEY_FILE") if self.key_file else None
        cert = _read(self.cert_file, f"{p}TLS_CERT_FILE") if self.cert_file else None
        return grpc.ssl_channel_credentials(ca, key, cert)

    def channel_options(self) -> list[tuple[str, str]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
