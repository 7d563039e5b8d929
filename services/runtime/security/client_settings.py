"""Settings fields for a client of one of our services, made once per target
(`reranker`, `retriever`, `indexer`) so every client reads the same names:
RAG_<TARGET>_TLS, _TLS_CA_FILE, _TLS_CERT_FILE, _TLS_KEY_FILE,
_TLS_SERVER_NAME, _TOKEN, _TOKEN_FILE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr, create_model

from rag_client import ClientSettings, InvalidSettings

_FIELDS: dict[str, tuple[Any, Any, str]] = {
    "tls": (bool, False, "Call the {label} over TLS (implied by a CA or certificate file)"),
    "tls_ca_file": (
        Path | None,
        None,
        "CA bundle that signed the {label}'s certificate (unset: the system trust store)",
    ),
    "tls_cert_file": (Path | None, None, "Client certificate shown to the {label} (mutual TLS)"),
    "tls_key_file": (Path | None, None, "Private key of that client certificate"),
    "tls_server_name": (
        str,
        "",
        "Name to check in the {label}'s certificate instead of the address's host",
    ),
    "token": (SecretStr | None, None, "Bearer token sent to the {label} (prefer the _FILE form)"),
    "token_file": (
        Path | None,
        None,
        "File holding the bearer token for the {label}; re-read when it changes",
    ),
}


def client_settings(target: str, label: str) -> type[BaseModel]:
    """A settings mixin with the client fields for `target` (e.g. "reranker")."""
    fields: dict[str, Any] = {
        f"{target}_{name}": (kind, Field(default, description=text.format(label=label)))
        for name, (kind, default, text) in _FIELDS.items()
    }
    return create_model(f"{target.title()}ClientSettings", __base__=BaseModel, **fields)


def client_address(addr: str, variable: str) -> str:
    """`addr` if our client accepts it as a target (host:port, dns:///…),
    else ValueError naming `variable`: a settings validator's check, so a
    malformed address stops the start instead of meeting the first call."""
    try:
        ClientSettings(addr)
    except InvalidSettings as exc:
        raise ValueError(f"{variable}: {exc}") from None
    return addr
