"""A Prometheus registry served on an HTTP listener of its own.

Each app keeps its metrics in its own `CollectorRegistry` (not the process
global), so two apps in one process (the embedded stack, the tests) never
share or collide on a series. The listener is prometheus_client's small HTTP
server in a daemon thread, on an address apart from the service's own: the
metrics describe traffic and refusals, which is for operators, not callers.
"""

from __future__ import annotations

import asyncio
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from services.core.errors import ConfigError


class MetricsListener:
    """`GET /metrics` (any path, in fact) on `host:port` (0: a free port)."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @classmethod
    def start(
        cls, registry: CollectorRegistry, host: str, port: int, setting_hint: str = ""
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
