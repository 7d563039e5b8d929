"""The one shape of every service app, and the loop that runs apps.

An app is built from explicit parts (its settings, the shared parts, its
telemetry), does no I/O in its constructor, opens its port in `start()` and
releases everything in `stop()`. `python -m services.<name>` builds its app
and hands it to `run_apps`; the embedded stack hands it two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from services.common.logging import get_logger
from services.common.server import GrpcServer, run_until_signal

log = get_logger(__name__)


class ServiceApp(Protocol):
    """What `run_apps` needs of an app."""

    server: GrpcServer

    async def start(self) -> int:
        """Open the port (returned) and everything behind it; health turns
        SERVING when the app is ready to answer."""
        ...

    async def stop(self) -> None:
        """Health NOT_SERVING, in-flight calls finish within the grace
        period, then the app's own resources are released."""
        ...


async def run_apps(
    apps: Sequence[ServiceApp], close: Callable[[], None] | None = None, **context: object
) -> None:
    """Start `apps` in order, serve until SIGTERM/SIGINT, stop them in reverse
    order, then `close()` what they shared."""
    started: list[ServiceApp] = []
    try:
        for app in apps:
            await app.start()
            started.append(app)
        log.info("services_ready", ports=[app.server.port for app in apps], **context)
        await run_until_signal([app.server for app in apps])
    finally:
        for app in reversed(started):
            await app.stop()
        if close is not None:
            await asyncio.to_thread(close)
