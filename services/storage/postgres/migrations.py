"""The PostgreSQL schema's version, and the migrations between versions.

Every part creates its tables with `CREATE ... IF NOT EXISTS`, so a new
schema needs nothing more. A release that changes a table bumps
`SCHEMA_VERSION` and adds, under the version it starts from, the statements
that bring an existing schema forward (`{schema}` is the schema's quoted
name). `migrate` runs at every start-up inside `postgres_sql.ensure_schema`'s
transaction, under its advisory lock, before the tables' DDL: when several
processes start together one migrates and the others find the work done, and
a migration that fails leaves the schema as it was (DDL is transactional in
PostgreSQL).

A schema written by a newer release is refused rather than read wrongly.
A schema from before versions were recorded holds the version-1 tables and
is recorded as version 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from services.core.errors import ConfigError

SCHEMA_VERSION = 1
# from version N: the statements that make it N + 1
MIGRATIONS: Mapping[int, Sequence[str]] = {}
VERSION_KEY = "schema_version"


def migrate(
    conn: psycopg.Connection[Any],
    schema: str,
    current: int = SCHEMA_VERSION,
    migrations: Mapping[int, Sequence[str]] = MIGRATIONS,
) -> int:
    """Bring `schema` to version `current`; the version it was at. Call
    inside a transaction holding the schema's advisory lock."""
    info = sql.Identifier(schema, "store_info")
    conn.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, value text NOT NULL)").format(
            info
        )
    )
    row = conn.execute(
        sql.SQL("SELECT value FROM {} WHERE key = %s").format(info), (VERSION_KEY,)
    ).fetchone()
    recorded = int(row[0]) if row else current
    if recorded > current:
        raise ConfigError(
            f"PostgreSQL schema {schema!r} (POSTGRES_SCHEMA) is at version {recorded}, written "
            f"by a newer release; this one knows versions up to {current}: run the newer "
            "release, or restore a backup taken before the upgrade (docs/postgres.md)"
        )
    for version in range(recorded, current):
        _apply(conn, schema, version, migrations)
    conn.execute(
        sql.SQL(
            "INSERT INTO {} VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ).format(info),
        (VERSION_KEY, str(current)),
    )
    return recorded


def _apply(
    conn: psycopg.Connection[Any],
    schema: str,
    version: int,
    migrations: Mapping[int, Sequence[str]],
) -> None:
    if version not in migrations:
        raise ConfigError(
            f"PostgreSQL schema {schema!r}: no migration from version {version} to {version + 1}"
        )
    for statement in migrations[version]:
        conn.execute(sql.SQL(statement).format(schema=sql.Identifier(schema)))
