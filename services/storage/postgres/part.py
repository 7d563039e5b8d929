"""What the three PostgreSQL parts of an index share: a connection pool of
their own, writes that join the run in flight (`postgres_run`), a call's
statement time, and the same lifecycle; the two stores also read their chunk
tables alike (`scan`, `count`). The vector store, the lexical store and the
manifest each add their tables and their reads and writes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import sql

from services.core.deadline import Deadline
from services.core.errors import StoreUnavailable
from services.core.models import ScopeFilter, StoredChunk
from services.storage.postgres.run import RunConnection
from services.storage.postgres.sql import (
    chunk_columns,
    deadline_budget_s,
    open_pool,
    pg_errors,
    scope_condition,
    stored_chunk,
    within,
)


class PostgresPart:
    """A pool opened for `name`, closed again if `set_up` (the part's tables,
    its recorded settings) fails, so a refused part holds no connection."""

    name: str
    schema: str

    def __init__(
        self,
        url: str,
        pool_size: int,
        timeout_s: float,
        run: RunConnection | None,
        set_up: Callable[[psycopg.Connection[Any]], None],
    ) -> None:
        self.timeout_s = timeout_s
        self._run = run
        self._pool = open_pool(url, pool_size, timeout_s, self.name)
        self._closed = False
        try:
            with pg_errors(self.name, "create schema"), self._pool.connection() as conn:
                set_up(conn)
        except BaseException:
            self._pool.close()
            raise

    def ping(self) -> None:
        """The server answers and the part's schema is there: `SELECT 1` alone
        would call a store whose schema was dropped healthy."""
        info = sql.Identifier(self.schema, "store_info")
        with pg_errors(self.name, "ping"), self._conn() as conn:
            conn.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(info))

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        return False  # a failed transaction is an error; the run journal redoes the run

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    def _conn(self, deadline: Deadline | None = None) -> Any:
        """A pool connection; the wait for one ends by `deadline` too, not only
        by POSTGRES_TIMEOUT_S (a full pool must not outlast the caller)."""
        if self._closed:
            raise StoreUnavailable(f"{self.name}: store is closed")
        if deadline is None or not deadline.bounded:
            return self._pool.connection()
        return self._pool.connection(timeout=deadline.budget(self.timeout_s))

    def _write_conn(self) -> Any:
        """Writes join the run in flight, if one is open (`postgres_run`)."""
        if self._run is None or self._closed:
            return self._conn()  # the part's own pool (StoreUnavailable once closed)
        return self._run.writing(self._pool)

    def _budget(self, deadline: Deadline, what: str) -> float | None:
        """A call's statement time: POSTGRES_TIMEOUT_S, shortened to `deadline`
        (None for a deadline that never ends: the connection's own limit)."""
        return deadline_budget_s(self.name, deadline, self.timeout_s, what)

    def _scan_chunks(self, table: sql.Composable, batch: int) -> Iterator[list[StoredChunk]]:
        """Every row of `table` (one with the chunk columns) in chunk-id
        order, `batch` at a time (keyset pages)."""
        statement = sql.SQL(
            "SELECT {} FROM {} WHERE chunk_id > %s ORDER BY chunk_id LIMIT %s"
        ).format(chunk_columns(), table)
        after = ""
        while True:
            with pg_errors(self.name, "scan"), self._conn() as conn:
                rows = [stored_chunk(r) for r in conn.execute(statement, (after, batch))]
            if rows:
                yield rows
            if len(rows) < batch:
                return
            after = rows[-1].chunk_id

    def _count_chunks(
        self, table: sql.Composable, scope: ScopeFilter | None, deadline: Deadline
    ) -> int:
        """Rows of `table` inside `scope` (all when None)."""
        where, params = scope_condition(scope)
        statement = sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, where)
        budget_s = self._budget(deadline, "a count")
        with (
            pg_errors(self.name, "count", deadline),
            self._conn(deadline) as conn,
            within(conn, budget_s),
        ):
            row = conn.execute(statement, params).fetchone()
        return int(row[0]) if row else 0
