"""One indexing run as one PostgreSQL transaction.

When the vectors, the lexical index and the manifest live in one database,
a run can commit them together: `RunConnection.transaction()` opens one
connection and one transaction, and while it is open every write of the
three stores goes through it (`writing`); a store's own `conn.transaction()`
becomes a savepoint inside the run. The manifest's commit point is written
in the same transaction, so a Retriever in any process sees the run's rows,
the manifest entries and the new generation at the same instant, or none of
them. A run that fails, or an Indexer killed mid-run, is rolled back by the
server: nothing to undo, no intents left behind.

The generation rule (`visibility`) still holds on top of it: reads never go
through the run's connection, and rows stamped above the committed
generation stay hidden, so the two mechanisms never disagree.

Runs are one at a time per schema, across processes: the transaction takes
an advisory lock on the schema's name first, and a second writer is refused
at once with `StoreUnavailable` (retry when the first run ends) rather than
queueing behind a run that may take minutes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from services.core.errors import StoreUnavailable
from services.storage.postgres.sql import pg_errors, statement_timeout_ms

# The advisory-lock key space of runs, apart from the schema-creation lock
# (`postgres_sql.ensure_schema` locks hashtext(schema) alone).
RUN_LOCK_PREFIX = "rag-run:"


class RunConnection:
    """The connection of the run in flight, shared by one index's three
    PostgreSQL stores (`postgres_factory.open_postgres_storage`)."""

    def __init__(self, url: str, schema: str, timeout_s: float) -> None:
        self.url, self.schema, self.timeout_s = url, schema, timeout_s
        self._conn: psycopg.Connection[Any] | None = None
        # Writes may come from worker threads: one statement at a time on
        # the shared connection, and `transaction` / `writing` never race.
        self._lock = threading.RLock()

    @property
    def active(self) -> bool:
        return self._conn is not None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Commit everything written inside the block together, or nothing
        (an exception rolls it back and propagates)."""
        with self._lock:
            if self._conn is not None:
                raise StoreUnavailable("a run is already open on this index in this process")
            conn = self._connect()
        try:
            with pg_errors("postgres", "run"), conn.transaction():
                self._take_run_lock(conn)
                self._conn = conn
                try:
                    yield
                finally:
                    with self._lock:
                        self._conn = None
        finally:
            conn.close()

    @contextmanager
    def writing(self, pool: ConnectionPool) -> Iterator[psycopg.Connection[Any]]:
        """The connection a store's write goes through: the run's while one
        is open, else one of the store's own pool (autocommit)."""
        with self._lock:
            conn = self._conn
            if conn is not None:
                yield conn
                return
        with pool.connection() as own:
            yield own

    def _connect(self) -> psycopg.Connection[Any]:
        with pg_errors("postgres", "open a run"):
            return psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=max(1, int(self.timeout_s)),
                # As the pools': no write of a run waits for ever (POSTGRES_TIMEOUT_S).
                options=f"-c statement_timeout={statement_timeout_ms(self.timeout_s)}",
            )

    def _take_run_lock(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(
            "SELECT pg_try_advisory_xact_lock(hashtext(%s))", (RUN_LOCK_PREFIX + self.schema,)
        ).fetchone()
        if not row or not row[0]:
            raise StoreUnavailable(
                f"another Indexer is writing the index in PostgreSQL schema {self.schema!r}: "
                "runs are one at a time; retry when its run ends"
            )
