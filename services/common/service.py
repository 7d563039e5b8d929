"""The one shape of every service app, and the loop that runs apps.

An app is built from explicit parts (its settings, the shared parts, its
telemetry), does no I/O in its constructor, opens its port in `start()` and
releases everything in `stop()`. `python -m services.<name>` builds its app
and hands it to `run_apps`; the embedded stack hands it two.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from services.common.logging import configure_logging, get_logger
from services.common.observability.telemetry import Telemetry
from services.common.security.callers import Role
from services.common.server import GrpcServer, ServerOptions, run_until_signal
from services.common.settings import GrpcServiceSettings, load_settings

if TYPE_CHECKING:  # the parts pull in the stores and the embedding model
    from services.common.parts import PartsConfig, SharedParts

log = get_logger(__name__)


class ServiceApp(Protocol):
    """What `run_apps` needs of an app."""

    server: GrpcServer
    # True when stop() left work running past the grace period: the shared
    # parts are then left open for the process to exit without closing them.
    abandoned_work: bool

    async def start(self) -> int:
        """Open the port (returned) and everything behind it; health turns
        SERVING when the app is ready to answer."""
        ...

    async def stop(self) -> None:
        """Health NOT_SERVING, in-flight calls finish within the grace
        period, then the app's own resources are released."""
        ...


@dataclass(frozen=True)
class ServiceIdentity:
    """What names a service: `name` ("indexer") prefixes its settings
    (`<name>_port`, `<name>_metrics_port`) and its telemetry; `grpc_service`
    and `roles` are its gRPC service and the role each method needs."""

    name: str
    grpc_service: str
    roles: Mapping[str, Role]

    def server(
        self, settings: Any, port: int | None = None, telemetry: Telemetry | None = None
    ) -> GrpcServer:
        """The app's server from its GrpcServiceSettings. `port` None: the
        setting's (tests pass 0: any free port); `telemetry` None: from the
        settings (listener on `<name>_metrics_port`, tracing from OTEL_*). The
        app reads its telemetry back as `server.telemetry`."""
        grpc_port = getattr(settings, f"{self.name}_port") if port is None else port
        metrics_port = getattr(settings, f"{self.name}_metrics_port")
        telemetry = telemetry or Telemetry.from_settings(settings, self.name, metrics_port)
        options = ServerOptions.from_settings(settings, grpc_port)
        return GrpcServer(options, [self.grpc_service], self.roles, telemetry)


def freeze_start_up_objects() -> None:
    """Move what start-up made (models, libraries: ~0.5 M objects) out of the
    garbage collector's reach: they live as long as the process, and a full
    collection walking them stalled a request by ~300 ms every few thousand
    requests. Objects made afterwards are collected as usual."""
    gc.collect()
    gc.freeze()


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
        freeze_start_up_objects()
        log.info("services_ready", ports=[app.server.port for app in apps], **context)
        await run_until_signal([app.server for app in apps])
    finally:
        for app in reversed(started):
            await app.stop()
        if any(app.abandoned_work for app in started):
            exit_leaving_work_behind()
        if close is not None:
            await asyncio.to_thread(close)


def exit_leaving_work_behind() -> None:
    """End the process now, without closing the shared parts or joining the
    thread of a run that outlived the grace period: closing stores under a
    writer, or finalising the interpreter while native code (ONNX Runtime,
    tantivy) runs in a thread, aborts the process instead. The run's rows
    are uncommitted, so the recovery at the next start undoes them."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


S = TypeVar("S", bound=GrpcServiceSettings)


async def serve_on_parts(
    settings_class: type[S],
    parts_config: Callable[[S], PartsConfig],
    make_app: Callable[[S, SharedParts], ServiceApp],
) -> None:
    """A data service alone in its process (`python -m services.indexer`,
    `services.retriever`): its settings and the stores' loaded and checked,
    the shared parts opened (off the event loop), its app run until a signal."""
    from services.common.parts import open_parts
    from services.common.stores.settings import StoreSettings

    settings, stores = load_settings(settings_class), load_settings(StoreSettings)
    configure_logging(settings.log_level, settings.log_json)
    parts = await asyncio.to_thread(open_parts, stores, parts_config(settings))
    await run_apps(
        [make_app(settings, parts)],
        parts.close,
        mode=stores.resolved_mode().value,
        data_dir=str(stores.data_dir),
    )
