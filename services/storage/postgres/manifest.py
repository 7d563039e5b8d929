"""`Manifest` on PostgreSQL (PostgreSQL mode), beside the stores' tables.

Tables in `<schema>`: `documents` (one row per (doc_id, locale), chunk ids
and hashes as arrays), `intents` (a run's undo records, JSON as the other
manifests write them) and `meta` (index-level values, among them
`committed_generation`, the commit point `visibility` reads). Every write
that must be atomic is one transaction: `commit_run` writes the entries,
removes the dropped ones, advances the commit point and clears the run's
intents together, so a Retriever in another process never sees them apart.
Every statement ends by POSTGRES_TIMEOUT_S, or sooner at the deadline of the
call that sent it (`postgres_sql.within`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from services.core.deadline import Deadline
from services.storage.manifest import ManifestEntry, RunIntent, RunState
from services.storage.postgres.part import PostgresPart
from services.storage.postgres.run import RunConnection
from services.storage.postgres.sql import (
    ensure_schema,
    pg_errors,
    within,
)
from services.storage.visibility import COMMITTED_GENERATION_META

_DDL = """
CREATE TABLE IF NOT EXISTS {documents} (
    doc_id text NOT NULL,
    locale text NOT NULL,
    scope_id text NOT NULL,
    content_hash text NOT NULL,
    metadata_hash text NOT NULL,
    chunk_ids text[] NOT NULL,
    chunk_hashes text[] NOT NULL,
    updated_at text NOT NULL DEFAULT '',
    PRIMARY KEY (doc_id, locale)
);
CREATE INDEX IF NOT EXISTS documents_scope ON {documents} (scope_id);
CREATE INDEX IF NOT EXISTS documents_live_locales ON {documents} (locale)
    WHERE cardinality(chunk_ids) > 0;
CREATE INDEX IF NOT EXISTS documents_scope_live_locales ON {documents} (scope_id, locale)
    WHERE cardinality(chunk_ids) > 0;
CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {intents} (
    generation bigint NOT NULL,
    doc_id text NOT NULL,
    locale text NOT NULL,
    intent text NOT NULL,
    PRIMARY KEY (generation, doc_id, locale)
);
"""
_COLUMNS = (
    "doc_id, locale, scope_id, content_hash, metadata_hash, chunk_ids, chunk_hashes, updated_at"
)
_PUT = (
    "INSERT INTO {documents} (" + _COLUMNS + ") VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (doc_id, locale) DO UPDATE SET scope_id = EXCLUDED.scope_id, "
    "content_hash = EXCLUDED.content_hash, metadata_hash = EXCLUDED.metadata_hash, "
    "chunk_ids = EXCLUDED.chunk_ids, chunk_hashes = EXCLUDED.chunk_hashes, "
    "updated_at = EXCLUDED.updated_at"
)
# The locales a Retrieve ranks apart, read before every request's fan-out
# (cached a few seconds). `SELECT DISTINCT locale` reads every document of the
# scope: 16 ms over 403,780 documents unscoped; a loose scan of the partial
# indexes above seeks once per locale found instead, scope by scope (0.13 ms;
# bench/results/notes/locale_read_tail.md).
_LIVE = "cardinality(d.chunk_ids) > 0"
_LOCALES_IN_ALL = f"""
WITH RECURSIVE found(locale) AS (
    SELECT (SELECT d.locale FROM {{documents}} d WHERE {_LIVE} ORDER BY d.locale LIMIT 1)
    UNION ALL
    SELECT (
        SELECT d.locale FROM {{documents}} d WHERE {_LIVE} AND d.locale > f.locale
        ORDER BY d.locale LIMIT 1
    ) FROM found f WHERE f.locale IS NOT NULL
)
SELECT locale FROM found WHERE locale IS NOT NULL ORDER BY locale
"""
_LOCALES_IN_SCOPES = f"""
WITH RECURSIVE found(scope_id, locale) AS (
    SELECT s.scope_id, (
        SELECT d.locale FROM {{documents}} d WHERE {_LIVE} AND d.scope_id = s.scope_id
        ORDER BY d.locale LIMIT 1
    ) FROM unnest(%s::text[]) AS s(scope_id)
    UNION ALL
    SELECT f.scope_id, (
        SELECT d.locale FROM {{documents}} d
        WHERE {_LIVE} AND d.scope_id = f.scope_id AND d.locale > f.locale
        ORDER BY d.locale LIMIT 1
    ) FROM found f WHERE f.locale IS NOT NULL
)
SELECT DISTINCT locale FROM found WHERE locale IS NOT NULL ORDER BY locale
"""
# An empty scope array filters nothing.
_LOCALES_OF_DOCS = f"""
SELECT DISTINCT d.locale FROM {{documents}} d
WHERE {_LIVE} AND d.doc_id = ANY(%(docs)s::text[])
    AND (cardinality(%(scopes)s::text[]) = 0 OR d.scope_id = ANY(%(scopes)s::text[]))
ORDER BY d.locale
"""
_DELETE = "DELETE FROM {documents} WHERE doc_id = %s AND locale = %s"
_SET_META = (
    "INSERT INTO {meta} (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
_BEGIN = (
    "INSERT INTO {intents} (generation, doc_id, locale, intent) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (generation, doc_id, locale) DO UPDATE SET intent = EXCLUDED.intent"
)
_CLEAR = "DELETE FROM {intents} WHERE generation = %s"


class PostgresManifest(PostgresPart):
    """`Manifest` in `<schema>.documents`, `.intents` and `.meta`."""

    name = "postgres-manifest"

    def __init__(
        self, url: str, schema: str, *, pool_size: int = 4, timeout_s: float = 5.0,
        run: RunConnection | None = None,
    ) -> None:  # fmt: skip
        self.schema = schema
        self._names = {
            name: sql.Identifier(schema, name) for name in ("documents", "meta", "intents")
        }
        super().__init__(url, pool_size, timeout_s, run, self._set_up)

    def _set_up(self, conn: psycopg.Connection[Any]) -> None:
        ensure_schema(conn, self.schema, self._sql(_DDL))

    def _sql(self, template: str) -> sql.Composed:
        return sql.SQL(template).format(**self._names)

    # -- documents ------------------------------------------------------------

    def get(self, doc_id: str, locale: str, deadline: Deadline) -> ManifestEntry | None:
        return self.get_many([(doc_id, locale)], deadline).get((doc_id, locale))

    def get_many(
        self, keys: Sequence[tuple[str, str]], deadline: Deadline
    ) -> dict[tuple[str, str], ManifestEntry]:
        if not keys:
            return {}
        statement = self._sql(
            "SELECT " + _COLUMNS + " FROM {documents} d JOIN unnest(%s::text[], %s::text[]) "
            "AS k(doc_id, locale) USING (doc_id, locale)"
        )
        params = ([k[0] for k in keys], [k[1] for k in keys])
        rows = self._fetch("get", statement, params, deadline=deadline)
        return {(row[0], row[1]): _entry(row) for row in rows}

    def put_many(self, entries: Sequence[ManifestEntry], deadline: Deadline) -> None:
        self._transaction("put", [(_PUT, [_row(e) for e in entries])], deadline)

    def delete_many(self, keys: Sequence[tuple[str, str]], deadline: Deadline) -> None:
        self._transaction("delete", [(_DELETE, list(keys))], deadline)

    def entries(self) -> Iterable[ManifestEntry]:
        statement = self._sql("SELECT " + _COLUMNS + " FROM {documents} ORDER BY doc_id, locale")
        # An audit's whole read: the connection's own statement_timeout.
        return [_entry(row) for row in self._fetch("entries", statement, deadline=Deadline.never())]

    def keys_in_scope(self, scope_id: str, deadline: Deadline) -> Iterable[tuple[str, str]]:
        statement = self._sql(
            "SELECT doc_id, locale FROM {documents} WHERE scope_id = %s ORDER BY doc_id, locale"
        )
        rows = self._fetch("keys in scope", statement, (scope_id,), deadline=deadline)
        return [(r[0], r[1]) for r in rows]

    def locales_of(self, doc_id: str, deadline: Deadline) -> list[str]:
        statement = self._sql("SELECT locale FROM {documents} WHERE doc_id = %s ORDER BY locale")
        return [r[0] for r in self._fetch("locales", statement, (doc_id,), deadline=deadline)]

    def count(self, deadline: Deadline) -> int:
        statement = self._sql("SELECT count(*) FROM {documents}")
        return int(self._fetch("count", statement, deadline=deadline)[0][0])

    def chunk_counts_by_locale(self, deadline: Deadline) -> dict[str, int]:
        statement = self._sql(
            "SELECT locale, sum(cardinality(chunk_ids))::bigint FROM {documents} GROUP BY locale"
        )
        rows = self._fetch("chunk counts", statement, deadline=deadline)
        return {r[0]: int(r[1]) for r in rows}

    def locales_in(
        self, scope_ids: Sequence[str], doc_ids: Sequence[str], deadline: Deadline
    ) -> list[str]:
        template, params = locales_statement(scope_ids, doc_ids)
        statement = self._sql(template)
        rows = self._fetch("locales in scope", statement, params, deadline=deadline)
        return [r[0] for r in rows]

    # -- runs -----------------------------------------------------------------

    def begin_run(self, intents: Sequence[RunIntent], deadline: Deadline) -> None:
        rows = [(i.generation, i.doc_id, i.locale, i.to_json()) for i in intents]
        self._transaction("begin run", [(_BEGIN, rows)], deadline)

    def open_intents(self, deadline: Deadline) -> list[RunIntent]:
        statement = self._sql("SELECT intent FROM {intents} ORDER BY generation, doc_id, locale")
        rows = self._fetch("open intents", statement, deadline=deadline)
        return [RunIntent.from_json(r[0]) for r in rows]

    def run_state(self, deadline: Deadline) -> RunState:
        """One statement: the commit point and every open intent."""
        statement = self._sql(
            "SELECT (SELECT value FROM {meta} WHERE key = %s), coalesce((SELECT "
            "array_agg(intent ORDER BY generation, doc_id, locale) FROM {intents}), '{{}}')"
        )
        params = (COMMITTED_GENERATION_META,)
        committed, intents = self._fetch("run state", statement, params, deadline=deadline)[0]
        return RunState(int(committed or 0), tuple(RunIntent.from_json(i) for i in intents))

    def commit_run(
        self,
        generation: int,
        entries: Sequence[ManifestEntry],
        removed: Sequence[tuple[str, str]],
        deadline: Deadline,
        meta: Mapping[str, str] | None = None,
    ) -> None:
        """One transaction: the entries, the commit point (with `meta`) and
        the end of the run's intents are never seen apart (so `deadline`
        bounds it whole)."""
        self._transaction(
            "commit run",
            [
                (_PUT, [_row(e) for e in entries]),
                (_DELETE, list(removed)),
                (_SET_META, [*(meta or {}).items(), (COMMITTED_GENERATION_META, str(generation))]),
                (_CLEAR, [(generation,)]),
            ],
            deadline,
        )

    def clear_intents(self, generation: int, deadline: Deadline) -> None:
        self._transaction("clear intents", [(_CLEAR, [(generation,)])], deadline)

    # -- meta -----------------------------------------------------------------

    def get_meta(self, key: str, deadline: Deadline) -> str | None:
        statement = self._sql("SELECT value FROM {meta} WHERE key = %s")
        rows = self._fetch("get meta", statement, (key,), deadline=deadline)
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str, deadline: Deadline) -> None:
        self._transaction("set meta", [(_SET_META, [(key, value)])], deadline)

    # -- plumbing -------------------------------------------------------------

    def _fetch(
        self,
        action: str,
        statement: sql.Composable,
        params: Any = None,
        *,
        deadline: Deadline,
    ) -> list[Any]:
        if not deadline.bounded:  # an audit's: the connection's own statement_timeout
            with pg_errors(self.name, action, deadline), self._conn(deadline) as conn:
                return conn.execute(statement, params).fetchall()
        budget_s = self._budget(deadline, f"the {action}")
        with (
            pg_errors(self.name, action, deadline),
            self._conn(deadline) as conn,
            within(conn, budget_s),
        ):
            return conn.execute(statement, params).fetchall()

    def _transaction(
        self, action: str, steps: list[tuple[str, list[Any]]], deadline: Deadline
    ) -> None:
        budget_s = self._budget(deadline, f"the {action}")
        with (
            pg_errors(self.name, action, deadline),
            self._write_conn() as conn,
            within(conn, budget_s),
        ):
            cursor = conn.cursor()
            for template, rows in steps:
                if rows:
                    cursor.executemany(self._sql(template), rows)


def locales_statement(scope_ids: Sequence[str], doc_ids: Sequence[str]) -> tuple[str, Any]:
    """The statement (a template naming `{documents}`) and parameters that
    read the locales with chunks in `scope_ids` narrowed to `doc_ids`."""
    if doc_ids:  # the primary key narrows to those documents: as many rows as ids
        return _LOCALES_OF_DOCS, {"scopes": list(scope_ids), "docs": list(doc_ids)}
    if scope_ids:
        return _LOCALES_IN_SCOPES, (list(scope_ids),)
    return _LOCALES_IN_ALL, None


def _row(e: ManifestEntry) -> tuple[Any, ...]:
    return (
        e.doc_id,
        e.locale,
        e.scope_id,
        e.content_hash,
        e.metadata_hash,
        list(e.chunk_ids),
        list(e.chunk_hashes),
        e.updated_at,
    )


def _entry(row: Sequence[Any]) -> ManifestEntry:
    return ManifestEntry(
        doc_id=row[0],
        locale=row[1],
        scope_id=row[2],
        content_hash=row[3],
        metadata_hash=row[4],
        chunk_ids=tuple(row[5]),
        chunk_hashes=tuple(row[6]),
        updated_at=row[7],
    )
