"""Channels from our clients (Retriever → Reranker, gateway → Retriever,
CLI → Indexer) to our servers: TLS when configured, a bearer token on every
call when configured. The token comes from the one `TokenSource` of every
client (rag_client.transport): a rotated token file is used from the next call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from rag_client import transport
from rag_client.errors import InvalidSettings
from rag_client.transport import TokenSource
from services.core.errors import ConfigError
from services.runtime.observability.propagation import ContextPropagatingInterceptor
from services.runtime.security.tls import ClientTls


@dataclass(frozen=True)
class ClientSecurity:
    """How to reach one of our services. Empty: plaintext, no token."""

    tls: ClientTls | None = None
    token: TokenSource = field(default_factory=TokenSource)

    @classmethod
    def from_settings(cls, settings: Any, prefix: str) -> ClientSecurity:
        """Read `<prefix>_tls_*` and `<prefix>_token[_file]` fields (see client_settings)."""

        def get(name: str) -> Any:
            return getattr(settings, f"{prefix}_{name}")

        tls_on = get("tls") or any(get(n) for n in ("tls_ca_file", "tls_cert_file"))
        tls = None
        if bool(get("tls_cert_file")) != bool(get("tls_key_file")):
            raise ConfigError(
                f"RAG_{prefix.upper()}_TLS_CERT_FILE and RAG_{prefix.upper()}_TLS_KEY_FILE "
                "go together (a client certificate needs its key)"
            )
        if tls_on:
            tls = ClientTls(
                ca_file=get("tls_ca_file"),
                cert_file=get("tls_cert_file"),
                key_file=get("tls_key_file"),
                server_name=get("tls_server_name"),
                setting_prefix=f"RAG_{prefix.upper()}_",
            )
        secret = get("token")
        token = TokenSource(secret.get_secret_value() if secret else "", get("token_file"))
        if token.path is not None:
            # Read once now: a missing file otherwise surfaced on every call
            # (the gateway answered 500, the Retriever said its Reranker was
            # not serving) instead of stopping the start with its name.
            try:
                token.current()
            except InvalidSettings as exc:
                detail = str(exc).removeprefix("token_file: ")
                raise ConfigError(
                    f"RAG_{prefix.upper()}_TOKEN_FILE cannot be read: {detail}"
                ) from None
        return cls(tls, token)


def aio_channel(
    target: str, security: ClientSecurity, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A channel that sends the caller's credential, and the current trace
    context and request id (services.runtime.observability.propagation)."""
    interceptors: list[Any] = [ContextPropagatingInterceptor()]
    if security.token:
        interceptors.append(transport.BearerAio(security.token))
    credentials, opts = _tls(security, options)
    return transport.open_aio_channel(target, credentials, opts, interceptors)


def sync_channel(
    target: str, security: ClientSecurity, options: Sequence[tuple[str, Any]] = ()
) -> grpc.Channel:
    interceptors = [transport.BearerSync(security.token)] if security.token else []
    credentials, opts = _tls(security, options)
    return transport.open_sync_channel(target, credentials, opts, interceptors)


def _tls(
    security: ClientSecurity, options: Sequence[tuple[str, Any]]
) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
    if security.tls is None:
        return None, list(options)
    return security.tls.credentials(), [*options, *security.tls.channel_options()]
