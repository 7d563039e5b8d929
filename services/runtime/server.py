"""One server bootstrap for every service.

`GrpcServer` wires a `grpc.aio` server with the standard health service
(NOT_SERVING until the service says it is ready), server reflection, bounded
message sizes, the app's telemetry (metrics listener, tracing, the call
observer: services.runtime.observability) and graceful shutdown.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
from google.protobuf import descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rag_client.transport import MAX_MESSAGE_BYTES
from services.core.errors import ConfigError, StoreError, StoreUnavailable
from services.core.logging import get_logger
from services.runtime.observability.telemetry import Telemetry
from services.runtime.open_files import release_connections, reserve_connections
from services.runtime.request_decoding import RequestDecodingInterceptor
from services.runtime.request_memory import ReleaseInterceptor
from services.runtime.security.callers import Role
from services.runtime.security.server_security import ServerSecurity

log = get_logger(__name__)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Health entry that is SERVING for as long as the server answers at all, for
# liveness probes: readiness ("" and the service names) goes NOT_SERVING while
# a dependency is down, and restarting the process would not fix that.
LIVENESS_SERVICE = "liveness"


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port (tests)
    max_message_bytes: int = MAX_MESSAGE_BYTES
    shutdown_grace_s: float = 5.0
    security: ServerSecurity = field(default_factory=ServerSecurity)
    # Connections accepted at once; more are closed by gRPC on arrival, so peers
    # cannot take the descriptors the stores need (services/runtime/open_files.py).
    max_connections: int = 1024
    # Calls run at once; more are refused by gRPC with RESOURCE_EXHAUSTED.
    max_concurrent_rpcs: int = 256

    @classmethod
    def from_settings(cls, settings: Any, port: int) -> ServerOptions:
        """From a BaseServiceSettings (its security settings are checked here)."""
        return cls(
            host=settings.host,
            port=port,
            max_message_bytes=settings.max_message_bytes,
            shutdown_grace_s=settings.shutdown_grace_s,
            security=ServerSecurity.from_settings(settings),
            max_connections=settings.grpc_max_connections,
            max_concurrent_rpcs=settings.grpc_max_concurrent_rpcs,
        )


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


# gRPC's own reconnect backoff grows to 120 s: a peer that comes back stays
# unreachable that long (probe: the gateway refused searches for 125 s after a
# 300 s Retriever outage ended). Every service's client channel reconnects
# within a couple of seconds instead. `min_reconnect_backoff_ms` is not a
# backoff but gRPC's minimum connect timeout: at 250 ms a handshake that took a
# little longer on a busy machine (until the peer's SETTINGS frame) failed the
# call as UNAVAILABLE; a refused connection still fails at once, and the
# call's own deadline bounds the wait.
RECONNECT_OPTIONS: list[tuple[str, int | str]] = [
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 2000),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


def client_channel_options(max_message_bytes: int) -> list[tuple[str, int | str]]:
    """Client channels balance calls (not just connections) over every address
    the name resolves to, e.g. a Kubernetes headless Service's pods, and
    reconnect promptly (RECONNECT_OPTIONS)."""
    return [
        *channel_options(max_message_bytes),
        ("grpc.lb_policy_name", "round_robin"),
        *RECONNECT_OPTIONS,
    ]


class GrpcServer:
    """A grpc.aio server plus health and reflection. Register servicers on
    `.server` before `start()`; call `set_serving()` once ready."""

    def __init__(
        self,
        options: ServerOptions,
        service_names: Sequence[str],
        method_roles: Mapping[str, Role] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """`method_roles`: the role each method needs when callers are
        configured (a method not listed needs admin). `telemetry`: the app's
        metrics and tracing (None: a registry nobody serves)."""
        self.options = options
        self.service_names = list(service_names)
        self.telemetry = telemetry or Telemetry(service="grpc")
        security = options.security
        self.server = grpc.aio.server(
            options=[
                *channel_options(options.max_message_bytes),
                ("grpc.max_allowed_incoming_connections", options.max_connections),
                # gRPC binds with SO_REUSEPORT by default: a second server on
                # a taken port (a second process, or two services of one stack
                # given one port) started without error and took half of the
                # connections, answering UNIMPLEMENTED for the other's methods
                # (probe). Off, the second bind fails and is named.
                ("grpc.so_reuseport", 0),
            ],
            # A burst beyond it is refused at once, not queued unseen: a probe's
            # 1,000 calls waited up to 30 s each, the default deadline counting
            # only from their handler's start.
            maximum_concurrent_rpcs=options.max_concurrent_rpcs,
            # Every call is observed (refusals too); callers are identified
            # before anything else is said about their request; whatever
            # ends a call, its request is freed with it (request_memory).
            interceptors=[
                ReleaseInterceptor(),
                self.telemetry.observer(),
                *security.interceptors(method_roles or {}),
                RequestDecodingInterceptor(),
            ],
        )
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.port = 0
        self._reserved = 0  # connections counted against the process's open files
        self._stopped = asyncio.Event()

    async def start(self) -> int:
        security = self.options.security
        if security.reflection:
            names = [*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME]
            reflection.enable_server_reflection(names, self.server)
        host = self.options.host
        if ":" in host and not host.startswith("["):  # an IPv6 literal, e.g. RAG_HOST=::1
            host = f"[{host}]"
        address = f"{host}:{self.options.port}"
        most = self.options.max_connections
        reserve_connections(most, f"RAG_GRPC_MAX_CONNECTIONS={most}")
        try:
            self.port = self._bind(address)
        except BaseException:
            release_connections(most)
            raise
        self._reserved = most
        await self.set_serving(False)
        await self.health.set(LIVENESS_SERVICE, SERVING)
        declare_methods(self.telemetry, self.service_names)
        self.telemetry.start()
        await self.server.start()
        log.info(
            "server_started",
            port=self.port,
            services=self.service_names,
            metrics=self.telemetry.metrics_url,
            tracing=self.telemetry.tracing.enabled,
            tls=security.tls is not None,
            client_certs=bool(security.tls and security.tls.require_client_cert),
            callers=security.callers is not None,
        )
        return self.port

    def _bind(self, address: str) -> int:
        """The port bound; a taken or impossible address is a configuration
        error (exit status 2, naming the address), not a traceback."""
        credentials = self.options.security.credentials()
        try:
            if credentials is None:
                port = self.server.add_insecure_port(address)
            else:
                port = self.server.add_secure_port(address, credentials)
        except RuntimeError as exc:  # grpcio's "Failed to bind to address …"
            # grpcio says the same when it cannot use the certificate or key.
            hint = (
                ""
                if credentials is None
                else " (or RAG_TLS_CERT_FILE/KEY_FILE are no valid PEM pair)"
            )
            raise ConfigError(f"cannot listen on {address}: {exc}{hint}") from exc
        if port == 0:  # older grpcio returned 0 instead of raising
            raise ConfigError(f"cannot listen on {address}")
        return port

    async def set_serving(self, serving: bool, service: str | None = None) -> None:
        """Set health for one service, or for all of them and the overall ("")."""
        status = SERVING if serving else NOT_SERVING
        targets = [service] if service is not None else ["", *self.service_names]
        for name in targets:
            await self.health.set(name, status)

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        await self.set_serving(False)
        await self.server.stop(self.options.shutdown_grace_s)
        await self.telemetry.stop()
        release_connections(self._reserved)
        self._reserved = 0
        self._stopped.set()
        log.info("server_stopped", port=self.port)

    async def wait(self) -> None:
        await self._stopped.wait()


def declare_methods(telemetry: Telemetry, service_names: Sequence[str]) -> None:
    """Every method's series at 0 from the start (from the protobuf descriptors)."""
    pool = descriptor_pool.Default()
    for name in service_names:
        try:
            service = pool.FindServiceByName(name)
        except KeyError:
            continue
        for method in service.methods:
            telemetry.rpc.declare(_grpc_type(method), name, method.name)


def _grpc_type(method: Any) -> str:
    if method.client_streaming:
        return "bidi_stream" if method.server_streaming else "client_stream"
    return "server_stream" if method.server_streaming else "unary"


class AppServer(Protocol):
    """What `run_until_signal` stops: a `GrpcServer`, or the gateway's HTTP
    server (`gateway.service.HttpServer`)."""

    @property
    def port(self) -> int:
        """The port bound by `start()` (0 before)."""
        ...

    async def stop(self) -> None:
        """Stop accepting; in-flight calls finish within the grace period.
        Idempotent: the app's own `stop()` calls it again."""
        ...


def stop_requested() -> asyncio.Event:
    """An event set by SIGTERM/SIGINT. Installed before anything starts
    serving: a signal that arrives once a port answers but before the
    process is ready (a health probe passes, then the orchestrator stops the
    pod) must stop it gracefully, not kill it with the default action.
    Off the main thread (a loop a test runs in a thread) no signal reaches
    the loop: the event is only set by whoever holds it."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    if threading.current_thread() is not threading.main_thread():
        return stop
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_until_signal(servers: Sequence[AppServer], stop: asyncio.Event | None = None) -> None:
    """Block until SIGTERM/SIGINT (`stop`, from `stop_requested()`, when the
    caller listened earlier), then stop every server gracefully, all at once
    (in-flight calls get the grace period; gRPC health flips to NOT_SERVING
    first)."""
    stop = stop if stop is not None else stop_requested()
    await stop.wait()
    log.info("shutdown_requested")
    await asyncio.gather(*(s.stop() for s in servers))


STORE_HINT = (
    "is the store running and reachable? check POSTGRES_URL, or QDRANT_URL and "
    "OPENSEARCH_URL, or RAG_DATA_DIR for the embedded stores"
)


def _one_line(text: str, limit: int = 600) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def run_main(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Entry point of every service process (`services.runtime.entry`): a
    configuration error, found on loading the settings or on starting, is
    printed (it names the bad variable and value) and exits with status 2;
    `main` returning (after SIGTERM/SIGINT and a graceful stop) exits 0;
    a store that cannot be reached while starting (down, or a URL that
    resolves nowhere) exits 1 with one line naming the store variables, not a
    traceback; Ctrl-C before the signal handlers are in place (loading a model) exits
    130, as a shell reports SIGINT, with one line instead of a traceback."""
    try:
        asyncio.run(main())
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    except (StoreUnavailable, StoreError) as exc:
        print(f"cannot start: {_one_line(str(exc))} ({STORE_HINT})", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted during start-up; nothing was served", file=sys.stderr)
        sys.exit(130)
