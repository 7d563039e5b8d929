"""A service's gRPC health from its stores, checked every few seconds.

The Retriever serves while either store answers (Retrieve degrades to the
other); the Indexer needs both (a run writes to each), so one that does not
answer makes it NOT_SERVING, and a load balancer or `grpc_health_probe` sees
what the next run would meet. A store's ping checks its schema as well as
its server (a dropped PostgreSQL schema is not healthy).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Protocol

from services.core.logging import get_logger
from services.runtime.server import GrpcServer

log = get_logger(__name__)


class PingableStore(Protocol):
    name: str

    def ping(self) -> None: ...


class StoreHealthMonitor:
    """Sets `service` (and the server's overall status) SERVING or
    NOT_SERVING from its stores' pings: all of them with `need_all`, else any."""

    def __init__(
        self,
        server: GrpcServer,
        service: str,
        stores: Sequence[PingableStore],
        interval_s: float,
        *,
        need_all: bool,
    ) -> None:
        self.server, self.service = server, service
        self.stores = tuple(stores)
        self.interval_s, self.need_all = interval_s, need_all
        self._task: asyncio.Task[None] | None = None

    async def check_once(self) -> bool:
        healthy = [await self._answers(store) for store in self.stores]
        serving = all(healthy) if self.need_all else any(healthy)
        await self.server.set_serving(serving, self.service)
        await self.server.set_serving(serving, "")
        return serving

    async def _answers(self, store: PingableStore) -> bool:
        try:
            await asyncio.wait_for(asyncio.to_thread(store.ping), self.interval_s)
        except Exception as exc:
            log.warning("store_unreachable", store=store.name, error=str(exc))
            return False
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.check_once()

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
