"""Channels and call metadata from ClientSettings.

The services read the caller's credential from the `authorization` metadata
as `Bearer <token>` (services/runtime/security/server_auth.py); the client
sends it on every call. A token file is looked at on every call and re-read
when its modification time or size changes, so a rotated token is picked up
without a restart."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from rag_client.errors import InvalidSettings
from rag_client.settings import ClientSettings, check_token

AUTHORIZATION = "authorization"


class TokenSource:
    """The bearer token: given directly, or read from a file.

    The one token source of every client of the services (this package, the
    gateway, the Retriever's channel to the Reranker, the operator CLI). The
    file is looked at on every call (a stat) and re-read when its modification
    time or size changes, so a rotated token is used from the next call on. A
    rotation that replaces the file leaves a moment where it cannot be read:
    the last token read is kept then; a file never read raises InvalidSettings.
    """

    def __init__(self, token: str = "", path: Path | None = None) -> None:
        self._token = token
        self._path = path
        self._stamp: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._token or self._path)

    @property
    def path(self) -> Path | None:
        return self._path

    def current(self) -> str:
        if self._path is None:
            return self._token
        try:
            st = self._path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
            with self._lock:
                if stamp != self._stamp:
                    token = self._read_token()
                    if not token and self._stamp is not None:
                        return self._token  # mid-rotation (written empty first): the last one
                    if not token:
                        raise InvalidSettings("token_file", f"{self._path}: the file is empty")
                    self._token, self._stamp = token, stamp
                return self._token
        except OSError as exc:
            if self._stamp is not None:
                return self._token
            raise InvalidSettings("token_file", f"{self._path}: {exc.strerror}") from None

    def _read_token(self) -> str:
        """The file's token, checked as `token=` is: bytes that are not UTF-8,
        or a token gRPC cannot send (a second line, a NUL), raised deep inside
        gRPC, and differently by the sync and the async client (probe)."""
        assert self._path is not None
        try:
            token = self._path.read_bytes().decode("utf-8").strip()
        except UnicodeDecodeError:
            raise InvalidSettings("token_file", f"{self._path}: not UTF-8 text") from None
        try:
            check_token(token, "token_file")
        except InvalidSettings as exc:
            raise InvalidSettings("token_file", f"{self._path}: {exc.message}") from None
        return token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        token = self.current()
        return ((AUTHORIZATION, f"Bearer {token}"),) if token else ()


def token_source(settings: ClientSettings) -> TokenSource:
    return TokenSource(settings.token, settings.token_file)


def _reconnect_options(settings: ClientSettings) -> list[tuple[str, Any]]:
    """The channel reconnects on the retry policy's schedule: with gRPC's own
    default (first reconnect after 1 s, up to 120 s) a retry made while the
    channel waits to reconnect fails at once, however long its backoff."""
    policy = settings.retry
    return [
        ("grpc.initial_reconnect_backoff_ms", max(1, round(policy.initial_backoff * 1000))),
        ("grpc.max_reconnect_backoff_ms", max(1, round(policy.max_backoff * 1000))),
    ]


# What the services send and accept by default (services.runtime.server): with
# gRPC's own 4 MiB, a large answer the server sent whole (top_k 50, ten passages
# a page, long titles) failed here as RESOURCE_EXHAUSTED, which reads "back off".
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _options(settings: ClientSettings) -> list[tuple[str, Any]]:
    given = {name for name, _ in settings.channel_options}
    sizes = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    defaults = [(k, v) for k, v in [*_reconnect_options(settings), *sizes] if k not in given]
    options = [*defaults, *settings.channel_options]
    if settings.tls is not None and settings.tls.server_name:
        options.append(("grpc.ssl_target_name_override", settings.tls.server_name))
    return options


def _credentials(settings: ClientSettings) -> grpc.ChannelCredentials:
    assert settings.tls is not None
    try:
        ca, key, chain = settings.tls.read()
    except OSError as exc:
        raise InvalidSettings("tls", f"cannot read a TLS file: {exc}") from None
    return grpc.ssl_channel_credentials(ca, key, chain)


def sync_channel(settings: ClientSettings) -> grpc.Channel:
    """A blocking channel: TLS when settings.tls is set, else plaintext."""
    creds = None if settings.tls is None else _credentials(settings)
    return open_sync_channel(settings.target, creds, _options(settings))


def aio_channel(settings: ClientSettings) -> grpc.aio.Channel:
    """The asyncio counterpart of sync_channel."""
    creds = None if settings.tls is None else _credentials(settings)
    return open_aio_channel(settings.target, creds, _options(settings))


# The one transport every client of the services is built on: this package's
# clients (the operator CLI and the benchmarks use them), and the channels the
# services open to each other and the gateway opens to the Retriever
# (services.runtime.security.client), which add their interceptors.


def open_sync_channel(
    target: str,
    credentials: grpc.ChannelCredentials | None,
    options: Sequence[tuple[str, Any]],
    interceptors: Sequence[Any] = (),
) -> grpc.Channel:
    """Plaintext without credentials, TLS with them; interceptors applied in order."""
    if credentials is None:
        channel = grpc.insecure_channel(target, options=list(options))
    else:
        channel = grpc.secure_channel(target, credentials, options=list(options))
    return grpc.intercept_channel(channel, *interceptors) if interceptors else channel


def open_aio_channel(
    target: str,
    credentials: grpc.ChannelCredentials | None,
    options: Sequence[tuple[str, Any]],
    interceptors: Sequence[Any] = (),
) -> grpc.aio.Channel:
    """The asyncio counterpart of open_sync_channel."""
    chain = list(interceptors) or None
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=list(options), interceptors=chain)
    return grpc.aio.secure_channel(target, credentials, options=list(options), interceptors=chain)


class BearerAio(
    grpc.aio.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.aio.UnaryStreamClientInterceptor,  # type: ignore[misc]
):
    """Adds the token source's current bearer token to every call."""

    def __init__(self, token: TokenSource) -> None:
        self.token = token

    def _with_token(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), *self.token.metadata())
        return details._replace(metadata=metadata)

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_token(details), request)


class BearerSync(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """The blocking counterpart of BearerAio."""

    def __init__(self, token: TokenSource) -> None:
        self.token = token

    def _with_token(self, details: Any) -> Any:
        return details._replace(metadata=[*(details.metadata or ()), *self.token.metadata()])

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)
