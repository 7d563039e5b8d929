"""PostgreSQL faults as a caller should see them, on a real server: a
dropped schema is UNAVAILABLE with what to do (and makes the store's ping
fail, so health says so); a statement stopped by the store's own timeout
with time left in the caller's deadline is UNAVAILABLE, not the caller's
DEADLINE_EXCEEDED; a full pool waits no longer than the deadline; and no
message carries the statement's SQL."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, StoreUnavailable
from services.core.models import ScopeFilter
from services.storage.base import VectorQuery
from services.storage.postgres.vectors import PostgresVectorStore
from tests.storage.harness import DIM, make_chunk, seeded_vector
from tests.support.postgres import PostgresServer, drop_schema, running_postgres

pytestmark = pytest.mark.integration

SCOPE = ScopeFilter(scope_id="site-a")


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def search(store: PostgresVectorStore, deadline: Deadline) -> object:
    query = VectorQuery(vector=seeded_vector("q"), limit=3, scope=SCOPE)
    return store.search_many([query], deadline)


def test_a_dropped_schema_is_unavailable_with_what_to_do(postgres: PostgresServer) -> None:
    store = PostgresVectorStore(postgres.url, "t_dropped", DIM, pool_size=2)
    try:
        store.upsert([make_chunk("a")], [seeded_vector("a")], Deadline.after(10))
        store.ping()
        drop_schema(postgres.url, "t_dropped")
        with pytest.raises(StoreUnavailable, match="schema is missing") as searched:
            search(store, Deadline.after(10))
        assert "SELECT" not in str(searched.value)  # the server's message, not the statement
        with pytest.raises(StoreUnavailable, match="schema is missing"):
            store.ping()  # health checks see it
    finally:
        store.close()
        drop_schema(postgres.url, "t_dropped")


def test_the_store_timeout_with_time_left_is_unavailable_not_the_deadline(
    postgres: PostgresServer,
) -> None:
    """The `vectors` table locked by another session: the search waits for
    the lock until POSTGRES_TIMEOUT_S (1 s here) while the caller's deadline
    has 30 s left: the store is slow, the caller did nothing wrong."""
    store = PostgresVectorStore(postgres.url, "t_locked", DIM, pool_size=2, timeout_s=1.0)
    try:
        with psycopg.connect(postgres.url) as locker:
            locker.execute("LOCK TABLE t_locked.vectors IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreUnavailable, match="store's own limit"):
                search(store, Deadline.after(30))
            with pytest.raises(DeadlineExceeded, match="stopped at its deadline"):
                search(store, Deadline.after(0.3))  # the caller's deadline came first
            locker.rollback()
        search(store, Deadline.after(10))  # the pool's connections are fine afterwards
    finally:
        store.close()
        drop_schema(postgres.url, "t_locked")


def test_a_full_pool_waits_no_longer_than_the_deadline(postgres: PostgresServer) -> None:
    store = PostgresVectorStore(postgres.url, "t_full", DIM, pool_size=1, timeout_s=30.0)
    try:
        held = store._conn()  # the one connection
        refused = pytest.raises(DeadlineExceeded, match="no free connection by the deadline")
        with held, refused:
            search(store, Deadline.after(0.3))
    finally:
        store.close()
        drop_schema(postgres.url, "t_full")
