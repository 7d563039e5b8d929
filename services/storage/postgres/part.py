"""What the three PostgreSQL parts of an index share: a connection pool of
their own, writes that join the run in flight (`postgres_run`), and the same
lifecycle. The vector store, the lexical store and the manifest each add
their tables and their reads and writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from services.core.errors import StoreUnavailable
from services.storage.postgres.run import RunConnection
from services.storage.postgres.sql import open_pool, pg_errors


class PostgresPart:
    """A pool opened for `name`, closed again if `set_up` (the part's tables,
    its recorded settings) fails, so a refused part holds no connection."""

    name: str

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
        with pg_errors(self.name, "ping"), self._conn() as conn:
            conn.execute("SELECT 1")

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        return False  # a failed transaction is an error; the run journal redoes the run

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    def _conn(self) -> Any:
        if self._closed:
            raise StoreUnavailable(f"{self.name}: store is closed")
        return self._pool.connection()

    def _write_conn(self) -> Any:
        """Writes join the run in flight, if one is open (`postgres_run`)."""
        if self._run is None or self._closed:
            return self._conn()  # the part's own pool (StoreUnavailable once closed)
        return self._run.writing(self._pool)
