"""Health from the stores: the Retriever serves while either answers, the
Indexer only while both do (a run writes to each)."""

from __future__ import annotations

import asyncio

import pytest

from services.core.errors import StoreUnavailable
from services.runtime.store_health import StoreHealthMonitor

pytestmark = pytest.mark.unit


class _Store:
    """A labelled fake store whose ping fails on demand (the fault)."""

    def __init__(self, name: str, up: bool = True) -> None:
        self.name, self.up = name, up

    def ping(self) -> None:
        if not self.up:
            raise StoreUnavailable(f"{self.name}: the PostgreSQL schema is missing")


class _Server:
    """Records what the monitor reports (the real GrpcServer's health servicer)."""

    def __init__(self) -> None:
        self.status: dict[str, bool] = {}

    async def set_serving(self, serving: bool, service: str = "") -> None:
        self.status[service] = serving


@pytest.mark.parametrize(
    ("need_all", "lexical_up", "serving"),
    [(True, True, True), (True, False, False), (False, False, True)],
)
def test_serving_follows_the_stores(need_all: bool, lexical_up: bool, serving: bool) -> None:
    server = _Server()
    stores = (_Store("vectors"), _Store("lexical", lexical_up))
    monitor = StoreHealthMonitor(server, "svc", stores, 5.0, need_all=need_all)  # type: ignore[arg-type]
    assert asyncio.run(monitor.check_once()) is serving
    assert server.status == {"svc": serving, "": serving}


def test_a_store_that_comes_back_makes_it_serving_again() -> None:
    server, lexical = _Server(), _Store("lexical", up=False)
    monitor = StoreHealthMonitor(server, "svc", (_Store("v"), lexical), 5.0, need_all=True)  # type: ignore[arg-type]
    assert asyncio.run(monitor.check_once()) is False
    lexical.up = True
    assert asyncio.run(monitor.check_once()) is True
