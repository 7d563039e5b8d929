"""A Prometheus registry served on an HTTP listener of its own.

Each app keeps its metrics in its own `CollectorRegistry` (not the process
global), so two apps in one process (the embedded stack, the tests) never
share or collide on a series. The listener is prometheus_client's small HTTP
server in a daemon thread, on an address apart from the service's own: the
metrics describe traffic and refusals, which is for operators, not callers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from services.core.errors import ConfigError

# A scrape sends its request at once; a connection that sends nothing, or half
# a request, is closed after this. Without it, each idle connection held a
# thread of its own for ever: 1,500 of them made 1,511 threads and 35 MB.
READ_TIMEOUT_S = 10.0


class MetricsListener:
    """`GET /metrics` (any path, in fact) on `host:port` (0: a free port)."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @classmethod
    def start(
        cls,
        registry: CollectorRegistry,
        host: str,
        port: int,
        setting_hint: str = "",
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> MetricsListener:
        """`setting_hint` names the settings that move or disable the listener;
        a port that cannot be had is a configuration error (exit status 2)."""
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise ConfigError(
                f"the metrics listener cannot listen on {host}:{port} ({exc})"
                + (f"; {setting_hint}" if setting_hint else "")
            ) from exc
        server.RequestHandlerClass = _timed(server.RequestHandlerClass, read_timeout_s)
        return cls(server, thread)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"

    async def close(self) -> None:
        await asyncio.to_thread(self._stop)

    def _stop(self) -> None:
        self._server.shutdown()  # waits for serve_forever's loop to end
        self._server.server_close()
        self._thread.join(timeout=5)


def _timed(handler: Any, read_timeout_s: float) -> type[Any]:
    """`handler` whose connection's reads time out (socketserver applies a
    handler's `timeout`), and whose timeout closes it quietly: socketserver
    would print a traceback to stderr per idle connection."""

    class TimedMetricsHandler(handler):  # type: ignore[misc, valid-type]
        timeout = read_timeout_s

        def handle(self) -> None:
            with contextlib.suppress(TimeoutError):  # finish() closes the connection
                super().handle()

    return TimedMetricsHandler
