"""`LexicalStore` on PostgreSQL: the shared analyzer's terms, ranked by BM25
from term statistics kept in tables (`postgres_bm25` has the statement and
the reasons; `lexical_fields` the scoring every lexical store shares).

Tables in `<schema>`: `chunks` (the chunk columns, the exact identifier
forms and each field's length in terms), `postings`, `term_stats` and
`corpus` (one row: chunk count and field lengths). The analysis that built
the schema is recorded in `store_info`; another one is refused at start-up.

Every write is one transaction that first locks the `corpus` row, so
writers queue there (never deadlocking on term rows) and a search sees the
postings and the statistics of a batch together or not at all: a chunk's
old postings and their counts are removed, the new ones copied in
(`COPY`), and the counts added back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.deadline import Deadline
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.storage.base import SCAN_BATCH, search_budget_s
from services.storage.lexical_fields import (
    FIELD_BOOSTS,
    PlannedSearch,
    check_field_boosts,
    exact_first,
    index_format,
)
from services.storage.payload import chunk_with_payload
from services.storage.postgres.bm25 import FIELD_CODES
from services.storage.postgres.part import PostgresPart
from services.storage.postgres.run import RunConnection
from services.storage.postgres.sql import (
    CHUNK_COLUMNS,
    CHUNK_COLUMNS_DDL,
    STORE_INFO_DDL,
    check_recorded,
    chunk_columns,
    chunk_values,
    ensure_schema,
    last_wins,
    pg_errors,
    stored_chunk,
    within,
)
from services.storage.postgres.topk import one_snapshot, search_top_k

_DDL = (
    STORE_INFO_DDL
    + """
CREATE TABLE IF NOT EXISTS {chunks} ("""
    + CHUNK_COLUMNS_DDL
    + """,
    identifiers text[] NOT NULL,
    lens integer[] NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_scope ON {chunks} (scope_id, locale);
CREATE INDEX IF NOT EXISTS chunks_doc ON {chunks} (doc_id);
CREATE INDEX IF NOT EXISTS chunks_url ON {chunks} (url);
CREATE INDEX IF NOT EXISTS chunks_meta ON {chunks} USING gin (meta);
CREATE INDEX IF NOT EXISTS chunks_identifiers ON {chunks} USING gin (identifiers);
CREATE INDEX IF NOT EXISTS chunks_generation ON {chunks} (generation);
CREATE TABLE IF NOT EXISTS {postings} (
    term text NOT NULL,
    field smallint NOT NULL,
    chunk_id text NOT NULL,
    tf integer NOT NULL,
    len integer NOT NULL,
    positions integer[] NOT NULL,
    -- INCLUDE: term lookups are index-only scans, never touching the positions.
    PRIMARY KEY (term, field, chunk_id) INCLUDE (tf, len)
);
CREATE INDEX IF NOT EXISTS postings_chunk ON {postings} (chunk_id);
CREATE TABLE IF NOT EXISTS {term_stats} (
    field smallint NOT NULL,
    term text NOT NULL,
    df bigint NOT NULL,
    PRIMARY KEY (field, term)
);
CREATE TABLE IF NOT EXISTS {corpus} (
    id integer PRIMARY KEY CHECK (id = 1),
    docs bigint NOT NULL,
    lens bigint[] NOT NULL
);
INSERT INTO {corpus} VALUES (1, 0, '{{0,0,0}}') ON CONFLICT (id) DO NOTHING;
"""
)

# The write statements, in the order a write runs them.
LOCK = "SELECT docs FROM {corpus} WHERE id = 1 FOR UPDATE"
UNCOUNT_TERMS = (
    "UPDATE {term_stats} t SET df = t.df - g.n FROM (SELECT field, term, count(*) AS n "
    "FROM {postings} WHERE chunk_id = ANY(%s::text[]) GROUP BY field, term) g "
    "WHERE t.field = g.field AND t.term = g.term"
)
UNCOUNT_CHUNKS = (
    "UPDATE {corpus} SET docs = docs - g.n, lens = ARRAY[lens[1] - g.l1, lens[2] - g.l2, "
    "lens[3] - g.l3] FROM (SELECT count(*) AS n, coalesce(sum(lens[1]), 0) AS l1, "
    "coalesce(sum(lens[2]), 0) AS l2, coalesce(sum(lens[3]), 0) AS l3 FROM {chunks} "
    "WHERE chunk_id = ANY(%s::text[])) g WHERE id = 1"
)
DELETE_POSTINGS = "DELETE FROM {postings} WHERE chunk_id = ANY(%s::text[])"
DELETE_CHUNKS = "DELETE FROM {chunks} WHERE chunk_id = ANY(%s::text[])"
COPY_CHUNKS = "COPY {chunks} ({columns}, identifiers, lens) FROM STDIN"
COPY_POSTINGS = "COPY {postings} (term, field, chunk_id, tf, len, positions) FROM STDIN"
COUNT_TERMS = (
    "INSERT INTO {term_stats} (field, term, df) SELECT field, term, count(*) FROM {postings} "
    "WHERE chunk_id = ANY(%s::text[]) GROUP BY field, term ORDER BY field, term "
    "ON CONFLICT (field, term) DO UPDATE SET df = {term_stats}.df + EXCLUDED.df"
)
COUNT_CHUNKS = (
    "UPDATE {corpus} SET docs = docs + %s, lens = ARRAY[lens[1] + %s, lens[2] + %s, "
    "lens[3] + %s] WHERE id = 1"
)


def index_rows(
    chunk: Chunk, analyzer: TextAnalyzer
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """A chunk's `chunks` row and its postings rows."""
    analyzed = analyzer.analyze_chunk(chunk.title, chunk.heading_path, chunk.text)
    lens: list[int] = []
    postings: list[tuple[Any, ...]] = []
    for field, code in FIELD_CODES.items():
        terms = getattr(analyzed, field).split()
        lens.append(len(terms))
        positions: dict[str, list[int]] = {}
        for position, term in enumerate(terms):
            positions.setdefault(term, []).append(position)
        postings.extend(
            (term, code, chunk.chunk_id, len(where), len(terms), where)
            for term, where in positions.items()
        )
    identifiers = sorted(set(analyzed.identifiers.split()))
    return (*chunk_values(chunk), identifiers, lens), postings


class PostgresLexicalStore(PostgresPart, PlannedSearch):
    """BM25 over title + heading_path + text in `<schema>`'s lexical tables."""

    name = "postgres-lexical"

    def __init__(
        self, url: str, schema: str, *, field_boosts: Mapping[str, float] = FIELD_BOOSTS,
        analyzer: TextAnalyzer | None = None, pool_size: int = 8, timeout_s: float = 5.0,
        run: RunConnection | None = None,
    ) -> None:  # fmt: skip
        self.schema = schema
        self.analyzer = analyzer or TextAnalyzer()
        self.field_boosts = check_field_boosts(field_boosts)
        names = ("chunks", "postings", "term_stats", "corpus", "info")
        self._names = {n: sql.Identifier(schema, "store_info" if n == "info" else n) for n in names}
        super().__init__(url, pool_size, timeout_s, run, self._set_up)

    def _set_up(self, conn: psycopg.Connection[Any]) -> None:
        ensure_schema(conn, self.schema, self._sql(_DDL))
        expected = index_format(self.analyzer)
        check_recorded(conn, self.schema, "lexical_analysis", expected, "RAG_LEXICAL_CJK")

    def _sql(self, template: str) -> sql.Composed:
        return sql.SQL(template).format(columns=chunk_columns(), **self._names)

    # -- writes ---------------------------------------------------------------

    def upsert(self, chunks: Sequence[Chunk], deadline: Deadline) -> None:
        unique = last_wins(list(chunks), lambda chunk: chunk.chunk_id)
        if unique:
            budget_s = self._budget(deadline, "an upsert")
            with (
                pg_errors(self.name, "upsert", deadline),
                self._write_conn() as conn,
                within(conn, budget_s),
            ):
                self._replace(conn, unique)

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        """Re-index existing chunks with the new payload (title and heading
        terms depend on it); unknown ids are ignored."""
        if not updates:
            return
        budget_s = self._budget(deadline, "a payload update")
        errors = pg_errors(self.name, "update payload")
        with errors, self._write_conn() as conn, within(conn, budget_s):
            conn.execute(self._sql(LOCK))
            current = {row.chunk_id: row for row in self._get(conn, [i for i, _ in updates])}
            rewritten = [
                chunk_with_payload(current[chunk_id], payload)
                for chunk_id, payload in updates
                if chunk_id in current
            ]
            self._replace(conn, last_wins(rewritten, lambda chunk: chunk.chunk_id))

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        if chunk_ids:
            budget_s = self._budget(deadline, "a delete")
            with (
                pg_errors(self.name, "delete", deadline),
                self._write_conn() as conn,
                within(conn, budget_s),
            ):
                conn.execute(self._sql(LOCK))
                self._remove(conn, list(set(chunk_ids)))

    def _replace(self, conn: psycopg.Connection[Any], chunks: Sequence[Chunk]) -> None:
        """Remove the chunks' old rows and counts, then write and count the new ones."""
        conn.execute(self._sql(LOCK))
        ids = [chunk.chunk_id for chunk in chunks]
        self._remove(conn, ids)
        rows = [index_rows(chunk, self.analyzer) for chunk in chunks]
        with conn.cursor().copy(self._sql(COPY_CHUNKS)) as copy:
            for chunk_row, _ in rows:
                copy.write_row(chunk_row)
        with conn.cursor().copy(self._sql(COPY_POSTINGS)) as copy:
            for _, postings in rows:
                for posting in postings:
                    copy.write_row(posting)
        conn.execute(self._sql(COUNT_TERMS), (ids,))
        totals = [sum(row[-1][i] for row, _ in rows) for i in range(len(FIELD_CODES))]
        conn.execute(self._sql(COUNT_CHUNKS), (len(rows), *totals))

    def _remove(self, conn: psycopg.Connection[Any], ids: list[str]) -> None:
        for template in (UNCOUNT_TERMS, UNCOUNT_CHUNKS, DELETE_POSTINGS, DELETE_CHUNKS):
            conn.execute(self._sql(template), (ids,))

    # -- reads ----------------------------------------------------------------

    def search_plan(
        self, plan: QueryPlan, limit: int, scope: ScopeFilter, deadline: Deadline
    ) -> list[ScoredChunk]:
        if limit <= 0 or plan.is_empty():
            return []
        budget_s = search_budget_s(self.name, deadline, self.timeout_s)
        with (
            pg_errors(self.name, "search", deadline),
            self._conn(deadline) as conn,
            one_snapshot(conn, budget_s),
        ):
            rows = search_top_k(conn, self.schema, plan, self.field_boosts, scope, limit)
        hits = [ScoredChunk(stored_chunk(row), float(row[-1])) for row in rows]
        return exact_first(hits, plan)

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        if not chunk_ids:
            return []
        budget_s = search_budget_s(self.name, deadline, self.timeout_s)
        with (
            pg_errors(self.name, "get", deadline),
            self._conn(deadline) as conn,
            within(conn, budget_s),
        ):
            return self._get(conn, chunk_ids)

    def _get(self, conn: psycopg.Connection[Any], chunk_ids: Sequence[str]) -> list[StoredChunk]:
        statement = self._sql("SELECT {columns} FROM {chunks} WHERE chunk_id = ANY(%s::text[])")
        return [stored_chunk(row) for row in conn.execute(statement, (sorted(set(chunk_ids)),))]

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        return self._scan_chunks(self._names["chunks"], batch)

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        return self._count_chunks(self._names["chunks"], scope, deadline)

    # -- lifecycle ------------------------------------------------------------


__all__ = ["CHUNK_COLUMNS", "PostgresLexicalStore", "index_rows"]
