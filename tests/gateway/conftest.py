"""Fixtures shared by the gateway tests: the scripted Retriever (one gRPC
server per session, reset for every test), a real redis-server and headless
Chromium (`browser`, tests/gateway/browser_support.py)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.gateway.browser_support import browser  # noqa: F401 (a shared fixture)
from tests.gateway.support import RedisServer, RetrieverServer, run_redis_server, serve_retriever


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def retriever_server() -> AsyncIterator[RetrieverServer]:
    async with serve_retriever() as server:
        yield server


@pytest_asyncio.fixture
async def retriever(retriever_server: RetrieverServer) -> AsyncIterator[RetrieverServer]:
    retriever_server.servicer.reset()
    yield retriever_server
    retriever_server.servicer.reset()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian package `redis-server`)")
    workdir: Path = tmp_path_factory.mktemp("redis")
    with run_redis_server(workdir) as server:
        yield server
