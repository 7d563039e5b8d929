"""The gateway as a service app, in the shape every service app has
(`services.runtime.service.ServiceApp`), so that `python -m gateway` starts
through the same recipe as the gRPC services: settings → (no parts) →
`GatewayApp` → `run_apps` under `run_main`.

`HttpServer` is the HTTP counterpart of `GrpcServer`: uvicorn serving the app
on the process's event loop. It binds the port itself (a taken or impossible
address is a `ConfigError`, exit status 2), leaves SIGTERM/SIGINT to
`run_apps`, and on `stop()` stops accepting and lets in-flight requests
finish within RAG_SHUTDOWN_GRACE_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from contextlib import AsyncExitStack

import uvicorn
from starlette.types import ASGIApp

from gateway.app import create_app
from gateway.connections import (
    ConnectionLedger,
    ConnectionLimits,
    RefusalObserver,
    guarded_protocol,
)
from gateway.settings import GatewaySettings
from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.runtime.observability.tracing import Tracing
from services.runtime.open_files import release_connections, reserve_connections
from services.runtime.service import stop_budget

log = get_logger(__name__)


class _InLoopServer(uvicorn.Server):
    """uvicorn without its signal handlers: `run_apps` owns the signals and
    calls `HttpServer.stop()`."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """uvicorn serving `app` on the running event loop. The app's lifespan
    is not run here (`GatewayApp` runs it, so that its errors propagate)."""

    def __init__(
        self,
        app: ASGIApp,
        host: str,
        port: int,
        grace_s: float,
        settings_hint: str,
        limits: ConnectionLimits,
        on_refused: RefusalObserver | None = None,
    ) -> None:
        """`port` 0: any free port (tests); `settings_hint`: what a bind
        failure tells the operator to change; `limits`: per connection
        (gateway/connections.py), `on_refused` told of each refusal."""
        self.host, self.requested_port, self.settings_hint = host, port, settings_hint
        self.limits = limits
        self.ledger = ConnectionLedger(limits, on_refused)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            http=guarded_protocol(self.ledger),
            lifespan="off",
            # uvicorn would trust X-Forwarded-For from loopback by default; the app
            # reads it itself, from RAG_GATEWAY_FORWARDED_ALLOW_IPS only (gateway/clientip.py).
            proxy_headers=False,
            timeout_graceful_shutdown=int(grace_s),
            access_log=False,  # one structured line per search is logged by the app
            log_config=None,
            server_header=False,
            # A head still arriving is bounded here; one that came whole in a
            # single read, by the app (HeadSizeMiddleware), at the same figure.
            h11_max_incomplete_event_size=limits.max_head_bytes,
        )
        self.uvicorn = _InLoopServer(config)
        self.port = 0
        self._serving: asyncio.Task[None] | None = None
        self._stopped = False

    async def start(self) -> int:
        most = self.limits.max_connections
        reserve_connections(most, f"RAG_GATEWAY_MAX_CONNECTIONS={most}")
        try:
            sockets = self._bind()
        except BaseException:
            release_connections(most)
            raise
        self.port = sockets[0].getsockname()[1]
        self._serving = asyncio.create_task(self.uvicorn.serve(sockets=sockets))
        while not self.uvicorn.started:
            if self._serving.done():
                await self._serving  # its error, if it has one
                raise RuntimeError("uvicorn stopped during start-up")
            await asyncio.sleep(0.01)
        log.info("server_started", port=self.port, protocol="http")
        return self.port

    def _bind(self) -> list[socket.socket]:
        """Every address `host` names, as asyncio's `create_server` binds them,
        but here, so that a failure is a ConfigError naming the address (uvicorn
        would log it and call sys.exit)."""
        address = f"{self.host}:{self.requested_port}"
        sockets: list[socket.socket] = []
        try:
            infos = socket.getaddrinfo(
                self.host, self.requested_port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            for family, kind, proto, _, sockaddr in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(sockaddr)
        except OSError as exc:
            for sock in sockets:
                sock.close()
            raise ConfigError(f"cannot listen on {address}: {exc} ({self.settings_hint})") from exc
        return sockets

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish within the grace
        period (then cancel them), close the connections. Idempotent."""
        if self._serving is None:
            return
        self.uvicorn.should_exit = True
        await self._serving
        if not self._stopped:
            self._stopped = True
            release_connections(self.limits.max_connections)
            log.info("server_stopped", port=self.port, protocol="http")


class GatewayApp:
    """The gateway's HTTP app (`create_app`) and its `HttpServer`. The
    constructor does no I/O; `start()` runs the app's start-up (Retriever
    channel, Redis, metrics listener) and opens the port; `stop()` lets
    in-flight requests finish, then runs the app's shutdown."""

    abandoned_work = False  # no work outlives its request

    def __init__(
        self, settings: GatewaySettings, port: int | None = None, tracing: Tracing | None = None
    ) -> None:
        """`port` None: RAG_GATEWAY_PORT (tests pass 0: any free port);
        `tracing` None: from the OTEL_* variables (a bad one: ConfigError)."""
        self.settings = settings
        self.app = create_app(settings, tracing=tracing)
        self.server = HttpServer(
            self.app,
            settings.host,
            settings.gateway_port if port is None else port,
            settings.shutdown_grace_s,
            "set RAG_GATEWAY_PORT or RAG_HOST",
            ConnectionLimits(
                head_timeout_s=settings.gateway_header_timeout_s,
                max_connections=settings.gateway_max_connections,
                max_per_client=settings.gateway_max_connections_per_client,
                trusted_proxies=settings.trusted_proxies,
                send_timeout_s=settings.gateway_send_timeout_s,
                max_head_bytes=settings.gateway_max_head_bytes,
            ),
            on_refused=self.app.state.metrics.connection_refused,
        )
        self._running: AsyncExitStack | None = None

    @property
    def stop_budget_s(self) -> float:
        return stop_budget(self.settings)

    async def start(self) -> int:
        log.info(
            "gateway_starting",
            port=self.server.requested_port,
            retriever=self.settings.retriever_addr,
        )
        async with AsyncExitStack() as running:  # a failure undoes what started
            await running.enter_async_context(self.app.router.lifespan_context(self.app))
            port = await self.server.start()
            self._running = running.pop_all()
        # Logged once the port is bound: a bind that fails is the last line.
        state = self.app.state
        log.info(
            "gateway_started",
            port=port,
            public=self.settings.gateway_public_enabled,
            redis=self.settings.uses_redis,
            metrics=state.metrics_url,
            tracing=state.tracing_enabled,
        )
        return port

    async def stop(self) -> None:
        await self.server.stop()
        running, self._running = self._running, None
        if running is not None:
            await running.aclose()  # the app's shutdown: logs gateway_stopped
