"""What every client shares: a channel made from ClientSettings, the bearer
token on every call, the call's deadline and the retry loop. Subclasses add
one typed method per RPC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc

from rag_client import retry, streams, transport
from rag_client.deadline import Deadline, resolve
from rag_client.errors import ClientClosed, InvalidSettings, WrongEventLoop
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
        self._check_open(name)
        when = resolve(deadline, self.settings.timeout)
        return retry.CallSpec(f"{self.SERVICE}/{name}", when, self.settings.retry, idempotent)

    def __repr__(self) -> str:
        # The target and the state only: never the token, nor a TLS file's content.
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} {self.settings.target} {state}>"

    def _check_open(self, name: str) -> None:
        if self._closed:
            raise ClientClosed(f"{self.SERVICE}/{name}: the client is closed")

    def _closed_during(self, name: str) -> ClientClosed | None:
        """ClientClosed when close() came while a call of `name` ran (from
        another thread or task): gRPC then raised its own exceptions (a
        ValueError, a UsageError, CANCELLED, a bare CancelledError), probe."""
        if not self._closed:
            return None
        return ClientClosed(f"{self.SERVICE}/{name}: the client was closed during the call")


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
            self._check_open(name)  # closed during a retry's pause
            try:
                return method(request, timeout=timeout, metadata=self._token.metadata())
            except Exception as exc:
                if closed := self._closed_during(name):
                    raise closed from exc
                raise

        return retry.call(spec, attempt)

    def _stream(
        self, name: str, method: Callable[..., Any], request: Any, deadline: DeadlineArg
    ) -> Iterator[Any]:
        """The stream, started on the first message asked for: a generator
        that is never iterated writes nothing (it wrote, or not, depending on
        when the garbage collector cancelled it; probe)."""
        spec = self._spec(name, deadline, idempotent=False)
        return self._messages(name, spec, method, request)

    def _messages(
        self, name: str, spec: retry.CallSpec, method: Callable[..., Any], request: Any
    ) -> Iterator[Any]:
        self._check_open(name)
        try:
            call = streams.start(spec, method, request, self._token.metadata())
            yield from streams.iterate(spec, call)
        except Exception as exc:
            if closed := self._closed_during(name):
                raise closed from exc
            raise

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
            self._check_open(name)  # closed during a retry's pause
            try:
                return await method(request, timeout=timeout, metadata=self._token.metadata())
            except BaseException as exc:
                if replaced := self._closed_instead(name, exc) or _wrong_loop(name, exc):
                    raise replaced from exc
                raise

        return await retry.call_async(spec, attempt)

    def _stream(
        self, name: str, method: Callable[..., Any], request: Any, deadline: DeadlineArg
    ) -> AsyncIterator[Any]:
        """As SyncClient's: started on the first message asked for."""
        spec = self._spec(name, deadline, idempotent=False)
        return self._messages(name, spec, method, request)

    async def _messages(
        self, name: str, spec: retry.CallSpec, method: Callable[..., Any], request: Any
    ) -> AsyncIterator[Any]:
        self._check_open(name)
        try:
            call = streams.start(spec, method, request, self._token.metadata())
            async for message in streams.aiterate(spec, call):
                yield message
        except BaseException as exc:
            if replaced := self._closed_instead(name, exc) or _wrong_loop(name, exc):
                raise replaced from exc
            raise

    def _closed_instead(self, name: str, exc: BaseException) -> ClientClosed | None:
        """ClientClosed for what a close() during the call raised, unless the
        caller's own task is being cancelled: that CancelledError is theirs."""
        if isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                return None
        elif not isinstance(exc, Exception):
            return None  # KeyboardInterrupt, SystemExit, GeneratorExit
        return self._closed_during(name)

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


# What asyncio says when a future of one loop is awaited in another, or the
# loop a channel belongs to has closed.
_LOOP_MISUSE = ("attached to a different loop", "Event loop is closed", "different event loop")


def _wrong_loop(name: str, exc: BaseException) -> WrongEventLoop | None:
    """WrongEventLoop for the RuntimeError gRPC's channel raises when used from
    another loop than its own (a client made outside `asyncio.run`, or kept
    past it): raw and confusing before (probe)."""
    if not isinstance(exc, RuntimeError) or not any(m in str(exc) for m in _LOOP_MISUSE):
        return None
    return WrongEventLoop(
        f"{name}: this asyncio client belongs to another event loop (or one that has "
        "closed); make the client inside the loop that uses it, e.g. within the coroutine "
        "asyncio.run() runs"
    )
