"""One start-up recipe for every service, and the loop that runs its apps.

A process is made in four steps, the same for every service (the Indexer,
the Retriever, the Reranker, the embedded stack and the gateway):

    settings → parts → apps with start()/stop() → run_main

its settings are loaded and checked (a `ConfigError`, here or on starting,
exits with status 2: `services.runtime.server.run_main`); the parts its apps
share are opened (models, stores; nothing for the Reranker and the gateway);
its apps are built from both, with no I/O in their constructors; `run_apps`
starts them in order, serves until SIGTERM/SIGINT, stops them in reverse
order and closes the parts. Each `__main__` declares its steps as a
`ServiceRecipe`; `services.runtime.entry.service_main` runs it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from services.core.logging import configure_logging, get_logger
from services.runtime.misspelt_settings import misspelt_settings
from services.runtime.observability.telemetry import Telemetry
from services.runtime.security.callers import Role
from services.runtime.server import (
    AppServer,
    GrpcServer,
    ServerOptions,
    run_until_signal,
    stop_requested,
)
from services.runtime.settings import BaseServiceSettings, GrpcServiceSettings, load_settings

if TYPE_CHECKING:  # the parts pull in the stores and the embedding model
    from services.runtime.parts import PartsConfig, SharedParts
    from services.storage.settings import StoreSettings

log = get_logger(__name__)


class ServiceApp(Protocol):
    """What `run_apps` needs of an app (the gRPC apps, and `GatewayApp`)."""

    # True when stop() left work running past the grace period: the shared
    # parts are then left open for the process to exit without closing them.
    abandoned_work: bool

    @property
    def stop_budget_s(self) -> float:
        """How long its `stop()` may take (`stop_budget`): past it, the stop
        counts as work left behind."""
        ...

    @property
    def server(self) -> AppServer:
        """Its server: `server.port` once started; `run_until_signal` stops
        every app's server at once before the apps' own `stop()`."""
        ...

    async def start(self) -> int:
        """Open the port (returned) and everything behind it; health turns
        SERVING when the app is ready to answer."""
        ...

    async def stop(self) -> None:
        """Health NOT_SERVING, in-flight calls finish within the grace
        period, then the app's own resources are released."""
        ...


class LogSettings(Protocol):
    """The settings whose RAG_LOG_LEVEL/RAG_LOG_JSON a process logs by."""

    @property
    def log_level(self) -> str: ...

    @property
    def log_json(self) -> bool: ...


class Parts(Protocol):
    """What a process's apps share; closed once they have all stopped."""

    def close(self) -> None: ...


class NoParts:
    """The parts of a service whose app shares nothing (Reranker, gateway)."""

    def close(self) -> None:
        return None


def no_parts(settings: object) -> NoParts:
    return NoParts()


def no_context(settings: object) -> Mapping[str, object]:
    return {}


S = TypeVar("S")
P = TypeVar("P", bound=Parts)


@dataclass(frozen=True)
class ServiceRecipe(Generic[S, P]):
    """How one service process is made: settings → parts → apps.

    `settings` loads and checks everything the process reads (ConfigError:
    exit status 2, before anything is opened); `logging` picks the settings
    whose RAG_LOG_LEVEL/RAG_LOG_JSON apply; `parts` opens what the apps share
    (run off the event loop: it may load a model or open stores); `apps`
    builds the apps on them, in start order (no I/O); `context` is what the
    `services_ready` line says besides the ports."""

    settings: Callable[[], S]
    logging: Callable[[S], LogSettings]
    parts: Callable[[S], P]
    apps: Callable[[S, P], Sequence[ServiceApp]]
    context: Callable[[S], Mapping[str, object]] = no_context


async def serve(recipe: ServiceRecipe[S, P]) -> None:
    """Run `recipe` until SIGTERM/SIGINT (under `run_main`)."""
    settings = recipe.settings()
    chosen = recipe.logging(settings)
    configure_logging(chosen.log_level, chosen.log_json)
    for typo in misspelt_settings():
        log.warning("setting_not_read", variable=typo.variable, did_you_mean=typo.meant)
    context = recipe.context(settings)
    parts = await asyncio.to_thread(recipe.parts, settings)
    try:
        apps = recipe.apps(settings, parts)
    except BaseException:
        await asyncio.to_thread(parts.close)
        raise
    await run_apps(apps, parts.close, **context)


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


G = TypeVar("G", bound=GrpcServiceSettings)


class GrpcApp(Generic[G]):
    """What every gRPC app starts from: its settings, its server (`port` None:
    the setting's; tests pass 0: any free port) and the telemetry the server
    reports to. No I/O: `start()` opens the port."""

    abandoned_work = False  # no work outlives its RPC, unless an app says so

    def __init__(
        self, identity: ServiceIdentity, settings: G, port: int | None, telemetry: Telemetry | None
    ) -> None:
        self.settings = settings
        self.server = identity.server(settings, port, telemetry)
        self.telemetry = self.server.telemetry

    @property
    def stop_budget_s(self) -> float:
        return stop_budget(self.settings)


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
    order, then `close()` what they shared. An app that fails to start stops
    the ones already started (in reverse order) and its error propagates
    (a ConfigError: exit status 2, under `run_main`). A signal during the
    start lets the app being started finish starting, starts no more, and
    stops what started."""
    stop = stop_requested()
    started: list[ServiceApp] = []
    try:
        for app in apps:
            if stop.is_set():
                break
            await app.start()
            started.append(app)
        if len(started) == len(apps):  # ready: a signal stopped none from starting
            freeze_start_up_objects()
            log.info("services_ready", ports=[app.server.port for app in started], **context)
        await run_until_signal([app.server for app in started], stop)
    finally:
        overran = [app for app in reversed(started) if not await stop_within_budget(app)]
        if overran or any(app.abandoned_work for app in started):
            exit_leaving_work_behind()  # does not return
        elif close is not None:
            await asyncio.to_thread(close)


# Past the grace periods, what a stop still has to do (close channels, flush
# the telemetry) takes well under a second; ten leaves room on a loaded host.
STOP_MARGIN_S = 10.0


def stop_budget(settings: BaseServiceSettings) -> float:
    """An app's stop: in-flight calls get the grace period, and work still in
    their threads may get it again (the Indexer's runs), then the margin."""
    return 2 * settings.shutdown_grace_s + STOP_MARGIN_S


async def stop_within_budget(app: ServiceApp) -> bool:
    """Stop `app`; False when its stop overran `app.stop_budget_s`. A stop
    that never ends would keep a process that was told to go alive until
    something kills it: it is logged, with where every thread was, and the
    caller treats it as work left behind (the parts are not closed under it)."""
    stopping = asyncio.ensure_future(app.stop())
    # Not wait_for: on a timeout it waits for the cancelled stop to finish,
    # which a stop stuck in something that ignores cancellation never does.
    await asyncio.wait({stopping}, timeout=app.stop_budget_s)
    if stopping.done():
        stopping.result()  # its error, if it failed
        return True
    stopping.cancel()
    log.error("app_stop_overran", budget_s=app.stop_budget_s, threads=thread_stacks())
    return False


def thread_stacks() -> dict[str, str]:
    """Every thread's current stack, by thread name."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return {
        names.get(ident, str(ident)): "".join(traceback.format_stack(frame))
        for ident, frame in sys._current_frames().items()
    }


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


B = TypeVar("B", bound=BaseServiceSettings)


def one_app(
    settings_class: type[B], make_app: Callable[[B], ServiceApp]
) -> ServiceRecipe[B, NoParts]:
    """The recipe of a service whose app shares nothing (the Reranker, the
    gateway): its settings → its app."""
    return ServiceRecipe(
        settings=lambda: load_settings(settings_class),
        logging=lambda settings: settings,
        parts=no_parts,
        apps=lambda settings, parts: [make_app(settings)],
    )


@dataclass(frozen=True)
class StoreBacked(Generic[G]):
    """A data service's settings and the stores'."""

    service: G
    stores: StoreSettings


def stores_context(stores: StoreSettings) -> Mapping[str, object]:
    """What `services_ready` says of the stores a process opened."""
    return {"mode": stores.resolved_mode().value, "data_dir": str(stores.data_dir)}


def data_service(
    settings_class: type[G],
    parts_config: Callable[[G], PartsConfig],
    make_app: Callable[[G, SharedParts], ServiceApp],
) -> ServiceRecipe[StoreBacked[G], SharedParts]:
    """The recipe of a data service alone in its process (`python -m
    services.indexer`, `services.retriever`): its settings and the stores',
    the shared parts opened on them, its one app."""
    from services.runtime.parts import open_parts
    from services.storage.settings import StoreSettings

    return ServiceRecipe(
        settings=lambda: StoreBacked(load_settings(settings_class), load_settings(StoreSettings)),
        logging=lambda loaded: loaded.service,
        parts=lambda loaded: open_parts(loaded.stores, parts_config(loaded.service)),
        apps=lambda loaded, parts: [make_app(loaded.service, parts)],
        context=lambda loaded: stores_context(loaded.stores),
    )
