"""The kill-at-a-write-step test of `test_fault_injection`, with the stack's
storage in a real PostgreSQL server: there a run is one transaction, so the
server rolls a killed run back by itself. Right after the kill, before any
restart or recovery, not one row of the run is in any part, not even above
the commit point, and no intents are left; after a restart every answer,
`verify` and the counts are the base corpus's.

The kill is a real SIGKILL of the real stack process (tests.support.kill_at,
fault injection only); the server and the stores are real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.settings import StoreSettings
from tests.indexer.test_fault_injection import (
    BASE,
    StackProcess,
    assert_only_committed_data,
    run_faulty,
)
from tests.support.built_storage import open_built_storage
from tests.support.postgres import PostgresServer, running_postgres

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=37)]

# Inside a batch's write (vectors written, lexical not), a metadata-only
# rewrite, and just before the commit point: the three shapes of a run cut short.
STEPS = ["lexical_write", "payload", "commit"]
RUN_WORDS = ("nebulacrocus", "saffronkestrel", "renamed")


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


SCHEMA = "killed"
BASE_DATABASE = "fault_base"


def store_env(postgres: PostgresServer, database: str) -> dict[str, str]:
    return {"POSTGRES_URL": postgres.database_url(database), "POSTGRES_SCHEMA": SCHEMA}


def admin(postgres: PostgresServer, statement: str) -> None:
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(statement)


@pytest.fixture(scope="module")
def clean_counts(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The base corpus written by a clean run into its own database, the
    stack stopped, and that run's counts: each step's test starts from a copy
    of the database (CREATE DATABASE ... TEMPLATE), one start fewer per step."""
    admin(postgres, f"CREATE DATABASE {BASE_DATABASE}")
    stack = StackProcess(
        tmp_path_factory.mktemp("pg-base"), stores=store_env(postgres, BASE_DATABASE)
    )
    try:
        stack.upsert(BASE)
        return stack.counts()
    finally:
        stack.stop()


def rows_of_the_killed_run(postgres: PostgresServer, database: str) -> tuple[list[str], int]:
    """Between the kill and any restart: the run's words in either store,
    searched WITHOUT the visibility rule, and the intents left open."""
    settings = StoreSettings(POSTGRES_URL=postgres.database_url(database), POSTGRES_SCHEMA=SCHEMA)
    storage = open_built_storage(settings, 384)
    try:
        found = [
            hit.chunk.doc_id
            for word in RUN_WORDS
            for hit in storage.lexical.search(
                word, 10, ScopeFilter(), deadline=unrequested_deadline()
            )
        ]
        return found, len(storage.manifest.open_intents(deadline=unrequested_deadline()))
    finally:
        storage.close()


@pytest.mark.parametrize("step", STEPS)
def test_a_killed_run_leaves_nothing_and_needs_no_undo(
    step: str, postgres: PostgresServer, tmp_path: Path, clean_counts: tuple[int, ...]
) -> None:
    database = f"killed_{step}"
    admin(postgres, f"CREATE DATABASE {database} TEMPLATE {BASE_DATABASE}")
    stores = store_env(postgres, database)
    faulty = StackProcess(tmp_path, kill_at=step, stores=stores)
    try:
        run_faulty(faulty, step)
    finally:
        faulty.stop()
    try:
        assert rows_of_the_killed_run(postgres, database) == ([], 0)
        stack = StackProcess(tmp_path, stores=stores)
        try:
            assert_only_committed_data(stack, clean_counts)
        finally:
            stack.stop()
    finally:
        admin(postgres, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
