"""The crash loop of tests/stack/test_crash_loop.py on PostgreSQL stores (its
own module, so that a second test worker runs it beside the embedded one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stack.crash_loop_cases import TIME_CAP_S, assert_held, crash_loop
from tests.support.pgvector_probe import HNSW_BROKEN, hnsw_works
from tests.support.postgres import PostgresServer, running_postgres

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=75)]


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@pytest.mark.timeout(TIME_CAP_S + 900)
def test_the_postgres_stack_holds_under_a_crash_loop(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    # Where pgvector itself crashes (SIGILL on some CPUs) nothing can be
    # written: the test fails saying so, not on a vacuous ledger.
    assert hnsw_works(postgres), HNSW_BROKEN
    store_env = {"POSTGRES_URL": postgres.url, "POSTGRES_SCHEMA": "crash_loop"}
    assert_held(crash_loop(tmp_path, store_env))
