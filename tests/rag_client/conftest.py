"""Fixtures of the client's tests: the fault-injecting fake server (unit
tests only; see fault_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.rag_client.fault_server import Faults, serve_faults


@pytest.fixture(scope="module")
def fake_server() -> Iterator[tuple[Faults, str]]:
    yield from serve_faults()


@pytest.fixture
def faults(fake_server: tuple[Faults, str]) -> Faults:
    """The fake's script and record, emptied for each test."""
    fake_server[0].reset()
    return fake_server[0]


@pytest.fixture
def target(fake_server: tuple[Faults, str]) -> str:
    return fake_server[1]
