"""What every client shares: a channel made from ClientSettings, the bearer
token on every call, the call's deadline and the retry loop. Subclasses add
one typed method per RPC."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc

from rag_client import retry, streams, transport
from rag_client.deadline import Deadline, resolve
from rag_client.errors import ClientClosed, InvalidSettings
from rag_client.settings import ClientSettings

T = TypeVar("T")
DeadlineArg = Deadline | float | None  # a Deadline, seconds from now, or the settings' default


def _settings(settings: ClientSettings | str) -> ClientSettings:
    if isinstance(settings, str):
        return ClientSettings(target=settings)
    if not isinstance(settings, ClientSettings):
        raise InvalidSettings("settings", f"expected ClientSettings or a target, got {settings!r}")
    return settings


class _Common:
    SERVICE = ""  # "Retriever", for messages
    ENV_NAME = ""  # "retriever": RAG_RETRIEVER_* in from_env

    def __init__(self, settings: ClientSettings | str) -> None:
        self.settings = _settings(settings)
        self._token = transport.token_source(self.settings)
        self._closed = False

    @classmethod
    def from_env(cls, environ: Any = None, **overrides: Any) -> Self:
        """A client configured by the RAG_<SERVICE>_* variables (see ClientSettings.from_env)."""
        return cls(ClientSettings.from_env(cls.ENV_NAME, environ, **overrides))

    def _spec(self, name: str, deadline: DeadlineArg, idempotent: bool) -> retry.CallSpec:
        if self._closed:
            raise ClientClosed(f"{self.SERVICE}/{name}: the client is closed")
        when = resolve(deadline, self.settings.timeout)
        return retry.CallSpec(f"{self.SERVICE}/{name}", when, self.settings.retry, idempotent)


class SyncClient(_Common):
    """A blocking client; use it as a context manager or call close()."""

    def __init__(self, settings: ClientSettings | str, channel: grpc.Channel | None = None) -> None:
        """`channel`: one the caller opened to `settings.target` (with its own
        interceptors, say), used instead of one made from `settings`; the
        client closes it."""
        super().__init__(settings)
        self._channel = transport.sync_channel(self.settings) if channel is None else channel

    def _unary(
        self,
        name: str,
        method: Callable[..., T],
        request: Any,
        deadline: DeadlineArg,
        *,
        idempotent: bool,
    ) -> T:
        spec = self._spec(name, deadline, idempotent)

        def attempt(timeout: float) -> T:
            return method(request, timeout=timeout, metadata=self._token.metadata())

        return retry.call(spec, attempt)

    def _stream(
        self, name: str, method: Callable[..., Any], request: Any, deadline: DeadlineArg
    ) -> Iterator[Any]:
        spec = self._spec(name, deadline, idempotent=False)
        call = streams.start(spec, method, request, self._token.metadata())
        return streams.iterate(spec, call)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient(_Common):
    """An asyncio client; use it with `async with` or await close(). Make it
    inside the event loop that will use it."""

    def __init__(
        self, settings: ClientSettings | str, channel: grpc.aio.Channel | None = None
    ) -> None:
        """`channel`: as SyncClient's, an asyncio one."""
        super().__init__(settings)
        self._channel = transport.aio_channel(self.settings) if channel is None else channel

    async def _unary(
        self,
        name: str,
        method: Callable[..., Awaitable[T]],
        request: Any,
        deadline: DeadlineArg,
        *,
        idempotent: bool,
    ) -> T:
        spec = self._spec(name, deadline, idempotent)

        async def attempt(timeout: float) -> T:
            return await method(request, timeout=timeout, metadata=self._token.metadata())

        return await retry.call_async(spec, attempt)

    def _stream(
        self, name: str, method: Callable[..., Any], request: Any, deadline: DeadlineArg
    ) -> AsyncIterator[Any]:
        spec = self._spec(name, deadline, idempotent=False)
        call = streams.start(spec, method, request, self._token.metadata())
        return streams.aiterate(spec, call)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
