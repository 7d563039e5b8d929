"""ClientSettings from the environment variables the services' own clients
read (docs/configuration.md): RAG_<SERVICE>_ADDR, RAG_<SERVICE>_TLS,
_TLS_CA_FILE, _TLS_CERT_FILE, _TLS_KEY_FILE, _TLS_SERVER_NAME, _TOKEN,
_TOKEN_FILE. An error names the variable as well as the field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rag_client.errors import InvalidSettings

DEFAULT_ADDR = {
    "retriever": "localhost:50052",
    "indexer": "localhost:50051",
    "reranker": "localhost:50053",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
_FIELD_SUFFIX = {
    "target": "ADDR",
    "tls.ca_file": "TLS_CA_FILE",
    "tls.cert_file": "TLS_CERT_FILE",
    "tls.key_file": "TLS_KEY_FILE",
    "tls.server_name": "TLS_SERVER_NAME",
    "token": "TOKEN",
    "token_file": "TOKEN_FILE",
}


def client_env_names() -> set[str]:
    """Every variable `ClientSettings.from_env` may read, for each service."""
    suffixes = {*_FIELD_SUFFIX.values(), "TLS"}
    return {f"RAG_{service.upper()}_{suffix}" for service in DEFAULT_ADDR for suffix in suffixes}


def _flag(environ: Mapping[str, str], name: str) -> bool:
    value = environ.get(name, "").strip().lower()
    if value not in _TRUE | _FALSE:
        raise InvalidSettings("tls", f"{name}={value!r} is not true or false")
    return value in _TRUE


def _path(environ: Mapping[str, str], name: str) -> Path | None:
    value = environ.get(name, "")
    return Path(value) if value else None


# Builds the TLS settings from their fields: rag_client.settings passes its
# TlsSettings, so this module never imports the one that imports it.
TlsFactory = Callable[..., Any]


def _tls(environ: Mapping[str, str], prefix: str, tls_settings: TlsFactory) -> Any:
    files = {
        n: _path(environ, f"{prefix}TLS_{n.upper()}") for n in ("ca_file", "cert_file", "key_file")
    }
    server_name = environ.get(f"{prefix}TLS_SERVER_NAME", "")
    if not (_flag(environ, f"{prefix}TLS") or any(files.values())):
        return None
    return tls_settings(server_name=server_name, **files)


def settings_fields(
    service: str, environ: Mapping[str, str], tls_settings: TlsFactory
) -> dict[str, Any]:
    """ClientSettings keyword arguments for `service` ("retriever", "indexer");
    `tls_settings` builds the `tls` field from its parts."""
    if service not in DEFAULT_ADDR:
        raise InvalidSettings("service", f"{service!r} is not one of {sorted(DEFAULT_ADDR)}")
    prefix = f"RAG_{service.upper()}_"
    try:
        return {
            "target": environ.get(f"{prefix}ADDR") or DEFAULT_ADDR[service],
            "tls": _tls(environ, prefix, tls_settings),
            "token": environ.get(f"{prefix}TOKEN", "").strip(),
            "token_file": _path(environ, f"{prefix}TOKEN_FILE"),
        }
    except InvalidSettings as exc:
        raise named(exc, prefix) from None


def named(exc: InvalidSettings, prefix: str) -> InvalidSettings:
    """The same error, its message also naming the environment variable."""
    suffix = _FIELD_SUFFIX.get(exc.field)
    if suffix is None:
        return exc
    text = str(exc).removeprefix(f"{exc.field}: ")
    return InvalidSettings(exc.field, f"{text} (from {prefix}{suffix})")
