"""PostgreSQL mode's transactions and operations, on a real server.

A run as one transaction (`postgres_run`): another process's view (a second
`Storage` on the same schema, with its own connections) sees all three parts
of a run together at commit or nothing; a failure inside leaves nothing,
intents included; a second writer is refused at once, naming the schema;
outside a run the stores autocommit. The schema's version and migrations
(`postgres_migrations`), and a backup and restore with `pg_dump` /
`pg_restore` as docs/postgres.md describes them."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from services.core.deadline import Deadline
from services.core.errors import ConfigError, DeadlineExceeded, StoreUnavailable
from services.core.models import ScopeFilter
from services.storage.base import unrequested_deadline
from services.storage.factory import open_storage
from services.storage.manifest import RunIntent
from services.storage.postgres.migrations import SCHEMA_VERSION, VERSION_KEY, migrate
from services.storage.postgres.sql import limit_statement_time, pg_errors
from services.storage.postgres.vectors import PostgresVectorStore
from services.storage.settings import StoreSettings
from services.storage.storage import Storage
from services.storage.visibility import committed_generation
from tests.storage.harness import make_chunk
from tests.storage.manifest_contract import entry
from tests.support.postgres import PostgresServer, drop_schema, postgres_bin_dir, running_postgres

pytestmark = pytest.mark.integration

DIM = 8
SCHEMA = "t_run"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def open_index(postgres: PostgresServer) -> Storage:
    settings = StoreSettings(POSTGRES_URL=postgres.url, POSTGRES_SCHEMA=SCHEMA)
    return open_storage(settings, DIM)


@pytest.fixture
def two_views(postgres: PostgresServer) -> Iterator[tuple[Storage, Storage]]:
    """The writer's storage and an independent reader's (as another process)."""
    writer, reader = open_index(postgres), open_index(postgres)
    try:
        yield writer, reader
    finally:
        reader.close()
        writer.close()
        drop_schema(postgres.url, SCHEMA)


def write_run(storage: Storage, generation: int, doc: str) -> None:
    """What a run writes, in the pipeline's order: intents, both stores, commit."""
    chunk = make_chunk(doc, text=f"{doc} zanzibar quartz", generation=generation)
    storage.manifest.begin_run(
        [RunIntent(generation, doc, "en", None, (chunk.chunk_id,), ())],
        deadline=unrequested_deadline(),
    )
    storage.vectors.upsert([chunk], [[1.0] + [0.0] * (DIM - 1)], deadline=unrequested_deadline())
    storage.lexical.upsert([chunk], deadline=unrequested_deadline())
    storage.manifest.commit_run(
        generation, [entry(doc, chunks=1)], [], deadline=unrequested_deadline()
    )


def seen_by(storage: Storage) -> tuple[int, int, int, int, int]:
    """Rows in each part (unfiltered: even rows above the commit point), the
    commit point and the open intents."""
    return (
        storage.vectors.count(None, unrequested_deadline()),
        storage.lexical.count(None, unrequested_deadline()),
        storage.manifest.count(deadline=unrequested_deadline()),
        committed_generation(storage.manifest, unrequested_deadline()),
        len(storage.manifest.open_intents(deadline=unrequested_deadline())),
    )


def test_a_run_is_invisible_until_it_commits_then_whole(two_views) -> None:
    writer, reader = two_views
    with writer.run_transaction() as atomic:
        assert atomic
        write_run(writer, 1, "alpha")
        # Committed in the manifest's own statement, yet not for anyone else:
        # not the rows, not the entry, not the commit point, not the intents.
        assert seen_by(reader) == (0, 0, 0, 0, 0)
    assert seen_by(reader) == (1, 1, 1, 1, 0)
    scope = ScopeFilter(visible_generation=1)
    assert [
        h.chunk.doc_id
        for h in reader.lexical.search("zanzibar", 5, scope, deadline=unrequested_deadline())
    ] == ["alpha"]


def test_a_failure_inside_the_run_leaves_nothing_behind(two_views) -> None:
    writer, reader = two_views
    with writer.run_transaction():
        write_run(writer, 1, "alpha")
    with pytest.raises(RuntimeError, match="embedding failed"), writer.run_transaction():
        write_run(writer, 2, "beta")
        raise RuntimeError("embedding failed half-way")
    assert seen_by(reader) == (1, 1, 1, 1, 0)  # as after the first run: no intents
    assert seen_by(writer) == (1, 1, 1, 1, 0)


def test_a_second_writer_is_refused_at_once_naming_the_schema(two_views) -> None:
    writer, other = two_views
    with writer.run_transaction():
        refused = pytest.raises(StoreUnavailable, match=f"schema '{SCHEMA}'.*one at a time")
        with refused, other.run_transaction():
            pass  # pragma: no cover - refused before the block
        with pytest.raises(StoreUnavailable, match="already open"), writer.run_transaction():
            pass  # pragma: no cover
        write_run(writer, 1, "alpha")
    with other.run_transaction():  # the first run ended: the lock is free
        write_run(other, 2, "beta")
    assert seen_by(writer)[:4] == (2, 2, 2, 2)


def test_outside_a_run_every_write_commits_on_its_own(two_views) -> None:
    writer, reader = two_views
    write_run(writer, 1, "alpha")
    assert seen_by(reader) == (1, 1, 1, 1, 0)


def test_a_lost_server_fails_the_run_as_unavailable(postgres: PostgresServer) -> None:
    storage = open_index(postgres)
    try:
        with pytest.raises(StoreUnavailable), storage.run_transaction():
            with psycopg.connect(postgres.url, autocommit=True) as admin:
                # Cut the run's own connection, as a failover would.
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
                )
            write_run(storage, 1, "alpha")
        assert seen_by(storage) == (0, 0, 0, 0, 0)
    finally:
        storage.close()
        drop_schema(postgres.url, SCHEMA)


# -- schema versions and migrations -------------------------------------------


def store_info(postgres: PostgresServer, key: str) -> str | None:
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT value FROM {SCHEMA}.store_info WHERE key = %s", (key,)
        ).fetchone()
    return None if row is None else str(row[0])


def test_a_new_schema_records_its_version(two_views, postgres: PostgresServer) -> None:
    assert store_info(postgres, VERSION_KEY) == str(SCHEMA_VERSION)


def test_a_schema_from_a_newer_release_is_refused(two_views, postgres: PostgresServer) -> None:
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"UPDATE {SCHEMA}.store_info SET value = '99' WHERE key = %s", (VERSION_KEY,))
    with pytest.raises(ConfigError, match=f"'{SCHEMA}'.*version 99.*up to {SCHEMA_VERSION}"):
        open_index(postgres)


def test_a_migration_runs_once_under_the_lock_and_a_failing_one_changes_nothing(
    two_views, postgres: PostgresServer
) -> None:
    add_column = {1: ("ALTER TABLE {schema}.chunks ADD COLUMN IF NOT EXISTS note text",)}
    broken = {2: ("ALTER TABLE {schema}.chunks ADD COLUMN extra text", "SELECT nonsense")}
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        with conn.transaction():
            assert migrate(conn, SCHEMA, current=2, migrations=add_column) == 1
        with conn.transaction():
            assert migrate(conn, SCHEMA, current=2, migrations=add_column) == 2  # nothing to do
        with pytest.raises(psycopg.Error), conn.transaction():
            migrate(conn, SCHEMA, current=3, migrations=broken)
        columns = {
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'chunks'",
                (SCHEMA,),
            )
        }
    assert "note" in columns and "extra" not in columns
    assert store_info(postgres, VERSION_KEY) == "2"


# -- backup and restore with the server's own tools ----------------------------


def test_pg_dump_and_pg_restore_of_the_schema_bring_the_index_back(
    two_views, postgres: PostgresServer, tmp_path: Path
) -> None:
    writer, _ = two_views
    with writer.run_transaction():
        write_run(writer, 1, "alpha")
    with writer.run_transaction():
        write_run(writer, 2, "beta")
    before = seen_by(writer)
    dump = tmp_path / "index.dump"
    pg_tool("pg_dump", "--format=custom", f"--schema={SCHEMA}", f"--file={dump}", postgres.url)
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    pg_tool("pg_restore", f"--dbname={postgres.url}", str(dump))
    restored = open_index(postgres)
    try:
        assert seen_by(restored) == before == (2, 2, 2, 2, 0)
        scope = ScopeFilter(visible_generation=2)
        hits = restored.lexical.search("zanzibar", 5, scope, deadline=unrequested_deadline())
        assert sorted(h.chunk.doc_id for h in hits) == ["alpha", "beta"]
        probe = [1.0] + [0.0] * (DIM - 1)
        assert (
            len(restored.vectors.search(probe, 5, scope, deadline=unrequested_deadline())) == 2
        )  # the HNSW index too
    finally:
        restored.close()


def pg_tool(name: str, *args: str) -> None:
    subprocess.run([str(postgres_bin_dir() / name), *args], check=True, capture_output=True)


# -- statement time ------------------------------------------------------------


def test_every_statement_has_a_time_limit_and_a_search_gets_its_deadline(
    two_views, postgres: PostgresServer
) -> None:
    writer, _ = two_views
    with writer.run_transaction():
        write_run(writer, 1, "alpha")
    store = writer.vectors
    assert isinstance(store, PostgresVectorStore)
    with store._pool.connection() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("5s",)
        # What a search does with 50 ms left: a slower statement is cancelled
        # by the server and reported as the deadline, not as an outage.
        stopped = pytest.raises(DeadlineExceeded, match="stopped at its deadline")
        with stopped, pg_errors("test", "search"), conn.transaction():
            limit_statement_time(conn, 0.05)
            conn.execute("SELECT pg_sleep(2)")
    probe = [1.0] + [0.0] * (DIM - 1)
    hits = store.search(probe, 5, ScopeFilter(visible_generation=1), Deadline.after(5.0))
    assert [h.chunk.doc_id for h in hits] == ["alpha"]


def test_a_write_waits_no_longer_than_its_deadline_and_the_run_rolls_back(
    two_views, postgres: PostgresServer
) -> None:
    writer, reader = two_views
    with writer.run_transaction():
        write_run(writer, 1, "alpha")
    chunk = make_chunk("beta", text="beta zanzibar quartz", generation=2)
    intent = RunIntent(2, "beta", "en", None, (chunk.chunk_id,), ())
    # Another session holds the vector table: the run's vector write waits.
    with psycopg.connect(postgres.url, autocommit=True) as blocker, blocker.transaction():
        blocker.execute(f"LOCK TABLE {SCHEMA}.vectors IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        stopped = pytest.raises(DeadlineExceeded, match="stopped at its deadline")
        with stopped, writer.run_transaction():
            writer.manifest.begin_run([intent], Deadline.after(30.0))
            writer.lexical.upsert([chunk], Deadline.after(30.0))
            writer.vectors.upsert([chunk], [[1.0] + [0.0] * (DIM - 1)], Deadline.after(0.5))
        waited = time.monotonic() - started
    assert waited < 2.5  # the deadline's 0.5 s, not POSTGRES_TIMEOUT_S (5 s)
    assert seen_by(reader) == (1, 1, 1, 1, 0)  # the whole run rolled back, intents too
    store = writer.vectors
    assert isinstance(store, PostgresVectorStore)
    with store._pool.connection() as conn:  # the limit was the transaction's alone
        assert conn.execute("SHOW statement_timeout").fetchone() == ("5s",)
