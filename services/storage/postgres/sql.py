"""What the PostgreSQL stores share: the connection pool, error translation,
schema creation under a lock, and the `ScopeFilter` as a SQL condition.

PostgreSQL mode keeps one index in one schema (`POSTGRES_SCHEMA`): the vector
table (pgvector), the lexical tables (`postgres_lexical`) and the manifest
tables (`postgres_manifest`). Every statement is built from `psycopg.sql`
pieces with values as bound parameters, so no user text is ever SQL.

The filter is the same rule as every other store's (`harness.reference_match`
in the tests is its definition): each set field must hold, lists (`scope_ids`,
`doc_ids`, `urls`) are any-of,
metadata pairs are `key=value` terms (`payload.metadata_term`) the row's
`meta` array must contain, and rows written by a generation above
`visible_generation` are hidden (`generation <= G`; rows written before
generations existed hold 0 and stay visible).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from services.core.deadline import Deadline
from services.core.errors import (
    ConfigError,
    DeadlineExceeded,
    RagError,
    StoreError,
    StoreUnavailable,
)
from services.core.models import ScopeFilter, StoredChunk
from services.storage.base import call_budget_s
from services.storage.payload import metadata_from_terms, metadata_term, metadata_terms
from services.storage.postgres.migrations import migrate

# The columns every chunk row has, in the order `stored_chunk` reads them.
CHUNK_COLUMNS = (
    "chunk_id",
    "doc_id",
    "position",
    "text",
    "url",
    "title",
    "heading_path",
    "scope_id",
    "locale",
    "content_hash",
    "meta",
    "generation",
)
CHUNK_COLUMNS_DDL = """
    chunk_id text PRIMARY KEY,
    doc_id text NOT NULL,
    position integer NOT NULL,
    text text NOT NULL,
    url text NOT NULL,
    title text NOT NULL,
    heading_path text NOT NULL,
    scope_id text NOT NULL,
    locale text NOT NULL,
    content_hash text NOT NULL,
    meta text[] NOT NULL,
    generation bigint NOT NULL DEFAULT 0"""


POOL_MAX_IDLE_S = 60.0


def open_pool(url: str, size: int, timeout_s: float, name: str) -> ConnectionPool:
    """A pool of autocommit connections, open and checked (StoreUnavailable if not)."""
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=size,
        kwargs={
            "autocommit": True,
            "connect_timeout": max(1, int(timeout_s)),
            # Every statement ends by POSTGRES_TIMEOUT_S at the latest, so a
            # stuck query never holds a worker thread and a connection for
            # good; searches shorten it to their deadline (limit_statement_time).
            "options": f"-c statement_timeout={statement_timeout_ms(timeout_s)}",
        },
        timeout=timeout_s,
        # Idle connections above min_size close after a minute, not psycopg's
        # ten: three pools a process (vector, lexical, manifest) holding idle
        # connections for ten minutes can use up max_connections and starve
        # each other, and the pool of another process, after a burst.
        max_idle=POOL_MAX_IDLE_S,
        name=name,
        open=False,
        # A connection is checked as it is handed out: after a server restart
        # or failover the stale ones are replaced instead of failing a request.
        check=ConnectionPool.check_connection,
        # The pool's reconnect backoff doubles without a cap until this
        # timeout (300 s by default): after a long outage a replica would stay
        # down about as long again. Past it the pool gives up, and the next
        # request starts a fresh attempt at once.
        reconnect_timeout=max(2 * timeout_s, 5.0),
    )
    try:
        pool.open(wait=True, timeout=timeout_s)
    except PoolTimeout as exc:
        pool.close()
        raise StoreUnavailable(f"{name}: cannot connect to PostgreSQL: {exc}") from exc
    return pool


# How long start-up's schema work (the advisory lock, migrations, DDL) may take.
SCHEMA_WORK_S = 600.0


def statement_timeout_ms(seconds: float) -> int:
    """PostgreSQL's statement_timeout for `seconds` (0 would mean none: at least 1 ms)."""
    return max(1, math.ceil(seconds * 1000))


def limit_statement_time(conn: psycopg.Connection[Any], seconds: float) -> None:
    """Inside a transaction: its statements end after `seconds` (QueryCanceled,
    which `pg_errors` reports as DeadlineExceeded)."""
    conn.execute(
        "SELECT set_config('statement_timeout', %s, true)", (str(statement_timeout_ms(seconds)),)
    )


def deadline_budget_s(store: str, deadline: Deadline, cap_s: float, what: str) -> float | None:
    """A call's statement time (`base.call_budget_s`: DeadlineExceeded when
    none is left), or None without a deadline to keep: the connection's own
    statement_timeout (POSTGRES_TIMEOUT_S) already holds then."""
    if not deadline.bounded:
        return None
    return call_budget_s(store, deadline, cap_s, what)


@contextmanager
def within(conn: psycopg.Connection[Any], seconds: float | None) -> Iterator[None]:
    """A transaction whose statements end after `seconds` (None: the
    connection's own limit). The limit is transaction-local (set_config(...,
    true)): on a pool connection it ends with the transaction; inside a run
    (`postgres_run`, where this is a savepoint) it lasts until the run's next
    limit or its end, and every limit a run sets is within the run's deadline."""
    with conn.transaction():
        if seconds is not None:
            limit_statement_time(conn, seconds)
        yield


# The schema (or part of it) is gone or not this release's: an operator dropped
# it, or a restore brought an older one. No caller's mistake and nothing a
# retry of the same call mends: UNAVAILABLE, with what to do.
_SCHEMA_MISSING = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedColumn,
    psycopg.errors.InvalidSchemaName,
    psycopg.errors.UndefinedFunction,
    psycopg.errors.UndefinedObject,
)
# A cancel with more than this left of the caller's deadline was the store's
# own statement_timeout (POSTGRES_TIMEOUT_S), not the caller's deadline.
_DEADLINE_SLACK_S = 0.05


def pg_message(exc: psycopg.Error) -> str:
    """The server's one-line message: str(exc) adds the statement's text
    (LINE 1: SELECT ...), which would reach callers in degradation notes."""
    primary = exc.diag.message_primary if isinstance(exc, psycopg.Error) else None
    return primary or (str(exc).splitlines() or [type(exc).__name__])[0]


@contextmanager
def pg_errors(store: str, action: str, deadline: Deadline | None = None) -> Iterator[None]:
    """PostgreSQL failures as the project's errors: connection trouble, a
    missing schema and the store's own statement timeout are StoreUnavailable
    (callers may retry elsewhere), the caller's deadline DeadlineExceeded
    (with `deadline`, the one the statement's time came from, the two are
    told apart), the rest StoreError."""
    try:
        yield
    except RagError:
        raise
    except psycopg.errors.QueryCanceled as exc:
        if deadline is not None and (
            not deadline.bounded or deadline.remaining_s() > _DEADLINE_SLACK_S
        ):
            raise StoreUnavailable(
                f"{store} {action}: the statement timed out at the store's own limit "
                "(POSTGRES_TIMEOUT_S) with time left in the deadline: the database is "
                "slow or a lock is held"
            ) from exc
        raise DeadlineExceeded(
            f"{store} {action} stopped at its deadline: {pg_message(exc)}"
        ) from exc
    except _SCHEMA_MISSING as exc:
        raise StoreUnavailable(
            f"{store} {action}: the PostgreSQL schema is missing or not this release's "
            f"({pg_message(exc)}); restart the service to recreate it, or restore it"
        ) from exc
    except PoolTimeout as exc:
        if deadline is not None and deadline.expired(_DEADLINE_SLACK_S):
            raise DeadlineExceeded(f"{store} {action}: no free connection by the deadline") from exc
        raise StoreUnavailable(f"{store} {action} failed: {exc}") from exc
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"{store} {action} failed: {exc}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"{store} {action} failed: {pg_message(exc)}") from exc


def ensure_schema(conn: psycopg.Connection[Any], schema: str, ddl: sql.Composed) -> None:
    """Bring the schema to this release's version (`postgres_migrations`),
    then run `ddl` (CREATE ... IF NOT EXISTS), once per schema even when
    several processes start together: the advisory lock serialises them."""
    with conn.transaction():
        # Schema work may wait for another process's migration and build
        # indexes: it gets SCHEMA_WORK_S, not the per-statement timeout.
        limit_statement_time(conn, SCHEMA_WORK_S)
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (schema,))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        migrate(conn, schema)
        conn.execute(ddl)


def check_recorded(
    conn: psycopg.Connection[Any], schema: str, key: str, expected: str, setting: str
) -> None:
    """Refuse a schema whose `store_info[key]` differs from `expected`; record it if new."""
    table = sql.Identifier(schema, "store_info")
    with conn.transaction():
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES (%s, %s) ON CONFLICT (key) DO NOTHING").format(table),
            (key, expected),
        )
        row = conn.execute(sql.SQL("SELECT value FROM {} WHERE key = %s").format(table), (key,))
        recorded = row.fetchone()
    if recorded is not None and recorded[0] != expected:
        raise ConfigError(
            f"PostgreSQL schema {schema!r} (POSTGRES_SCHEMA) was built with {key}={recorded[0]}, "
            f"but this service needs {expected} ({setting}): point POSTGRES_SCHEMA at a new "
            "schema and re-index (docs/indexing.md, 'Re-indexing after an analysis change')"
        )


STORE_INFO_DDL = "CREATE TABLE IF NOT EXISTS {info} (key text PRIMARY KEY, value text NOT NULL);"


def scope_condition(scope: ScopeFilter | None, alias: str = "") -> tuple[sql.Composable, list[Any]]:
    """ScopeFilter as a WHERE condition (TRUE when empty) and its parameters."""
    if scope is None or scope.is_empty():
        return sql.SQL("TRUE"), []

    def column(name: str) -> sql.Composable:
        return sql.Identifier(alias, name) if alias else sql.Identifier(name)

    parts: list[sql.Composable] = []
    params: list[Any] = []
    for name, value in (("scope_id", scope.scope_id), ("locale", scope.locale)):
        if value:
            parts.append(sql.SQL("{} = %s").format(column(name)))
            params.append(value)
    lists = (("scope_id", scope.scope_ids), ("doc_id", scope.doc_ids), ("url", scope.urls))
    for name, values in lists:
        if values:
            parts.append(sql.SQL("{} = ANY(%s::text[])").format(column(name)))
            params.append(list(values))
    if scope.metadata:
        parts.append(sql.SQL("{} @> %s::text[]").format(column("meta")))
        params.append([metadata_term(key, value) for key, value in scope.metadata])
    if scope.visible_generation is not None:
        parts.append(sql.SQL("{} <= %s").format(column("generation")))
        params.append(scope.visible_generation)
    return sql.SQL(" AND ").join(parts), params


# What a search's first phase reads (payload.SEARCH_FIELDS; `meta` holds the
# metadata): the other columns are NULL in its rows, read whole by `get`.
SEARCH_COLUMNS = frozenset(
    {"chunk_id", "doc_id", "position", "scope_id", "locale", "meta", "generation"}
)


def chunk_columns(alias: str = "", *, search: bool = False) -> sql.Composable:
    """CHUNK_COLUMNS for a select list; `search`: the first phase's, with the
    rest as NULL (rows `stored_chunk` reads as partial)."""
    names = [
        (sql.Identifier(alias, c) if alias else sql.Identifier(c))
        if not search or c in SEARCH_COLUMNS
        else sql.SQL("NULL")
        for c in CHUNK_COLUMNS
    ]
    return sql.SQL(", ").join(names)


def chunk_values(chunk: Any) -> tuple[Any, ...]:
    """A `Chunk` as the values of CHUNK_COLUMNS."""
    return (
        chunk.chunk_id,
        chunk.doc_id,
        chunk.position,
        chunk.text,
        chunk.url,
        chunk.title,
        chunk.heading_path,
        chunk.scope_id,
        chunk.locale,
        chunk.content_hash,
        metadata_terms(chunk.metadata),
        chunk.generation,
    )


def stored_chunk(row: tuple[Any, ...] | list[Any]) -> StoredChunk:
    """The first len(CHUNK_COLUMNS) values of a row as a StoredChunk (partial
    when the text column was not read: `chunk_columns(search=True)`)."""
    return StoredChunk(
        chunk_id=row[0],
        doc_id=row[1],
        position=int(row[2]),
        text=row[3] or "",
        url=row[4] or "",
        title=row[5] or "",
        heading_path=row[6] or "",
        scope_id=row[7],
        locale=row[8],
        content_hash=row[9] or "",
        metadata=metadata_from_terms(row[10] or []),
        generation=int(row[11]),
        partial=row[3] is None,
    )


def last_wins(items: list[Any], key: Any) -> list[Any]:
    """One item per key, the last one given (a batch may repeat a chunk)."""
    return list({key(item): item for item in items}.values())
