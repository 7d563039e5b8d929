"""`VectorStore` on PostgreSQL with pgvector (PostgreSQL mode).

One table, `<schema>.vectors` (`postgres_vector_schema`): the chunk columns
every PostgreSQL store has (`postgres_sql.CHUNK_COLUMNS`, metadata as
`key=value` terms in `meta`) and `embedding vector(dim)`, with an HNSW index
(`vector_cosine_ops`) and b-tree / GIN indexes on the filter columns. Cosine
similarity is `1 - (embedding <=> q)`, as Qdrant reports it.

Search: the filter is a WHERE clause on the same statement, and pgvector's
iterative index scan (`hnsw.iterative_scan = strict_order`, pgvector 0.8)
keeps walking the graph until `limit` rows pass it, so a narrow scope still
fills its page (without it HNSW returns `ef_search` candidates and the
filter then drops most of them). `hnsw.ef_search` follows `base.SearchEf`,
sized by the table's row estimate (`pg_class.reltuples`, kept by ANALYZE).
The index orders by distance alone; an outer query orders equal scores by
chunk_id, like the other stores.

Writes are one transaction per call (upsert: INSERT ... ON CONFLICT DO
UPDATE), so a search sees a batch whole or not at all. Every call ends by
its deadline (`postgres_sql.within`: a transaction-local statement_timeout).
Vectors are stored at unit length, as Qdrant stores them for cosine
(`vectors` hands them back).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg import sql

from services.core.deadline import Deadline
from services.core.errors import StoreError
from services.core.models import Chunk, ChunkPayload, ScopeFilter, ScoredChunk, StoredChunk
from services.storage.base import (
    DEFAULT_VECTOR_SEARCH,
    SCAN_BATCH,
    SECOND_VECTOR,
    IndexProgress,
    PointCount,
    SearchAsBatch,
    SearchEf,
    VectorQuery,
    check_using,
    check_vector_counts,
    search_budget_s,
)
from services.storage.payload import metadata_terms
from services.storage.postgres.part import PostgresPart
from services.storage.postgres.run import RunConnection
from services.storage.postgres.sql import (
    CHUNK_COLUMNS,
    check_recorded,
    chunk_columns,
    chunk_values,
    last_wins,
    pg_errors,
    scope_condition,
    stored_chunk,
    within,
)
from services.storage.postgres.vector_schema import (
    check_dim,
    check_pgvector,
    create_schema,
)

# The column of each vector a chunk may carry (base.VectorQuery.using).
VECTOR_COLUMNS = {"": "embedding", SECOND_VECTOR: "cross_lingual"}


def search_statement(
    table: sql.Identifier, scope: ScopeFilter, using: str = ""
) -> tuple[sql.Composed, list[Any]]:
    """The KNN query: nearest `limit` rows inside `scope`, equal scores by chunk_id.
    Parameters: the vector (a list of floats, sent in binary: see _VECTOR),
    the filter's, then the limit."""
    where, params = scope_condition(scope)
    statement = sql.SQL(
        "SELECT * FROM (SELECT {columns}, 1 - ({vector} <=> %b::float4[]::vector) AS score "
        "FROM {table} WHERE {where} ORDER BY {vector} <=> %b::float4[]::vector LIMIT %s) AS knn "
        "ORDER BY score DESC, chunk_id"
    ).format(
        columns=chunk_columns(search=True),
        vector=sql.Identifier(VECTOR_COLUMNS[using]),
        table=table,
        where=where,
    )
    return statement, params


def upsert_statement(table: sql.Identifier, second: bool = False) -> sql.Composed:
    vectors = ["embedding", *(["cross_lingual"] if second else [])]
    names = [*CHUNK_COLUMNS, *vectors]
    updates = [sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in names[1:]]
    return sql.SQL(
        "INSERT INTO {table} ({columns}) VALUES ({values}) "
        "ON CONFLICT (chunk_id) DO UPDATE SET {updates}"
    ).format(
        table=table,
        columns=sql.SQL(", ").join(map(sql.Identifier, names)),
        values=sql.SQL(", ").join(
            [sql.Placeholder()] * len(CHUNK_COLUMNS) + [_VECTOR] * len(vectors)
        ),
        updates=sql.SQL(", ").join(updates),
    )


# Vectors go to the server in binary (a float8[] the server rounds to float4,
# as it rounds the text form: the same vector). psycopg's text form of a list
# of 384 floats took 0.8 ms to write, twice per search (the probe is in the
# score and in the ORDER BY), beside the ~5 ms the search itself takes in the
# server (bench/results/notes/storage_modes_ratios.md).
_VECTOR = sql.SQL("%b::float4[]::vector")
PGVECTOR_MAX_EF = 1000  # pgvector's upper bound
# Transaction-local (set_config(..., true)), in one round trip: the HNSW
# candidate list, iterative scans, and whether the planner may scan and sort
# (on: an exact search; off: through the index, see EXACT_BELOW).
SEARCH_SETTINGS = (
    "SELECT set_config('hnsw.ef_search', %s, true), "
    "set_config('hnsw.iterative_scan', 'strict_order', true), "
    "set_config('enable_seqscan', %s, true), set_config('enable_sort', %s, true)"
)
# Which path a search takes is decided here, not by the planner: it prices a
# 384-dimension distance like a cheap operator and computes it for every row
# in scope rather than walk the graph (measured on SciFact, 12,500 rows: p50
# 89 ms that way, 15 ms through HNSW). As Qdrant's full-scan threshold: a
# scope of fewer rows than EXACT_BELOW is searched exactly (the planner's own
# plan: complete and cheap at that size), a larger one through the HNSW index
# (iterative scans keep filtered results complete there).
EXACT_BELOW = 2_000
ROWS_IN_SCOPE = "SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {where} LIMIT {cap}) AS few"
# The path chosen for a scope is kept this long (and at most PATH_CACHE_SIZE
# scopes), so a request's searches (one per locale) and the requests after it
# do not count the scope again. A stale choice costs speed only: both paths
# return the scope's nearest rows. A commit moves the scope's
# visible_generation, which is part of the key, so it is counted again then.
PATH_TTL_S = 5.0
ROW_ESTIMATE = (
    "SELECT c.reltuples::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = 'vectors'"
)
PATH_CACHE_SIZE = 1024
# Tables whose statistics a run left stale: more than a tenth of the rows (at
# least 1,000) changed since the last ANALYZE (autovacuum's rule, sooner).
STALE_TABLES = (
    "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s "
    "AND n_mod_since_analyze > 0.1 * GREATEST(n_live_tup, 10000)"
)

UPDATE_PAYLOAD = (
    "UPDATE {table} SET url = %s, title = %s, heading_path = %s, scope_id = %s, "
    "locale = %s, meta = %s, generation = %s WHERE chunk_id = %s"
)


def payload_values(chunk_id: str, payload: ChunkPayload) -> tuple[Any, ...]:
    return (
        payload.url,
        payload.title,
        payload.heading_path,
        payload.scope_id,
        payload.locale,
        metadata_terms(payload.metadata),
        payload.generation,
        chunk_id,
    )


class PostgresVectorStore(PostgresPart, SearchAsBatch):
    """Cosine KNN over chunk vectors in `<schema>.vectors`."""

    name = "postgres-vectors"

    def __init__(
        self, url: str, schema: str, dim: int, *, search_ef: SearchEf = DEFAULT_VECTOR_SEARCH,
        pool_size: int = 8, timeout_s: float = 5.0, run: RunConnection | None = None,
        second_dim: int = 0,
    ) -> None:  # fmt: skip
        """`second_dim`: each row also carries the `cross_lingual` vector column."""
        check_dim(dim)
        if second_dim:
            check_dim(second_dim)
        self.dim, self.second_dim = dim, second_dim
        self.schema = schema
        self.search_ef = search_ef
        self._rows = PointCount()
        self._table = sql.Identifier(schema, "vectors")
        self._paths: dict[ScopeFilter, tuple[bool, float]] = {}  # scope -> (exact, when)
        super().__init__(url, pool_size, timeout_s, run, self._set_up)

    def _set_up(self, conn: psycopg.Connection[Any]) -> None:
        create_schema(conn, self.schema, self.dim, self.second_dim)
        check_pgvector(conn)
        check_recorded(conn, self.schema, "vector_dim", str(self.dim), "the embedding model")
        check_recorded(
            conn,
            self.schema,
            "second_vector_dim",
            str(self.second_dim),
            "the cross-lingual model, RAG_CROSS_LINGUAL_MODEL; 0: none",
        )

    # -- writes ---------------------------------------------------------------

    def upsert(
        self,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
        deadline: Deadline,
        second_vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        check_vector_counts(self.name, self.second_dim, len(chunks), vectors, second_vectors)
        self._check_lengths(vectors, self.dim)
        seconds: Sequence[Sequence[float]] = second_vectors or [()] * len(chunks)
        self._check_lengths(second_vectors or [], self.second_dim)
        triples = list(zip(chunks, vectors, seconds, strict=True))
        rows = last_wins(triples, lambda row: row[0].chunk_id)
        if not rows:
            return
        values = [
            (*chunk_values(c), unit_length(v), *([unit_length(x)] if self.second_dim else []))
            for c, v, x in rows
        ]
        statement = upsert_statement(self._table, bool(self.second_dim))
        budget_s = self._budget(deadline, "an upsert")
        with (
            pg_errors(self.name, "upsert", deadline),
            self._write_conn() as conn,
            within(conn, budget_s),
        ):
            conn.cursor().executemany(statement, values)
        self._paths.clear()  # this process's writes: count the scopes again

    def _check_lengths(self, vectors: Sequence[Sequence[float]], dim: int) -> None:
        bad = [len(v) for v in vectors if len(v) != dim]
        if bad:
            raise StoreError(f"{self.name}: vectors of length {bad[0]}, expected {dim}")

    def update_payload(
        self, updates: Sequence[tuple[str, ChunkPayload]], deadline: Deadline
    ) -> None:
        if not updates:
            return
        statement = sql.SQL(UPDATE_PAYLOAD).format(table=self._table)
        values = [payload_values(chunk_id, payload) for chunk_id, payload in updates]
        budget_s = self._budget(deadline, "a payload update")
        errors = pg_errors(self.name, "update payload")
        with errors, self._write_conn() as conn, within(conn, budget_s):
            conn.cursor().executemany(statement, values)
        self._paths.clear()

    def delete(self, chunk_ids: Sequence[str], deadline: Deadline) -> None:
        if not chunk_ids:
            return
        statement = sql.SQL("DELETE FROM {} WHERE chunk_id = ANY(%s::text[])").format(self._table)
        budget_s = self._budget(deadline, "a delete")
        with (
            pg_errors(self.name, "delete", deadline),
            self._write_conn() as conn,
            within(conn, budget_s),
        ):
            conn.execute(statement, (list(chunk_ids),))
        self._paths.clear()

    # -- reads ----------------------------------------------------------------

    def search_many(
        self, queries: Sequence[VectorQuery], deadline: Deadline
    ) -> list[list[ScoredChunk]]:
        """One connection and one transaction for the batch, each query with
        its own path (exact or HNSW) and candidate list."""
        budget_s = search_budget_s(self.name, deadline, self.timeout_s)
        if all(query.limit <= 0 for query in queries):
            return [[] for _ in queries]
        with (
            pg_errors(self.name, "search", deadline),
            self._conn(deadline) as conn,
            within(conn, budget_s),
        ):
            return [self._search(conn, query) if query.limit > 0 else [] for query in queries]

    def _search(self, conn: psycopg.Connection[Any], query: VectorQuery) -> list[ScoredChunk]:
        check_using(self.name, self.second_dim, query.using)
        statement, params = search_statement(self._table, query.scope, query.using)
        probe = [float(x) for x in query.vector]
        points = self._rows.get(lambda: self._row_estimate(conn))
        ef = min(self.search_ef.candidates(query.limit, points), PGVECTOR_MAX_EF)
        planner = "on" if self._few_rows_in(conn, query.scope) else "off"
        conn.execute(SEARCH_SETTINGS, (str(ef), planner, planner))
        rows = conn.execute(statement, [probe, *params, probe, query.limit]).fetchall()
        return [ScoredChunk(stored_chunk(row), float(row[-1])) for row in rows]

    def _row_estimate(self, conn: psycopg.Connection[Any]) -> int:
        """The planner's row count of the table (-1 before its first ANALYZE)."""
        row = conn.execute(ROW_ESTIMATE, (self.schema,)).fetchone()
        return int(row[0]) if row is not None else 0

    def _few_rows_in(self, conn: psycopg.Connection[Any], scope: ScopeFilter) -> bool:
        """Fewer than EXACT_BELOW rows in `scope`: counted at most once per
        PATH_TTL_S per scope (see PATH_TTL_S)."""
        now = time.monotonic()
        kept = self._paths.get(scope)
        if kept is not None and now - kept[1] < PATH_TTL_S:
            return kept[0]
        few = self._count_few(conn, scope)
        if len(self._paths) >= PATH_CACHE_SIZE:
            self._paths.clear()  # rare: many distinct scopes; counting again is cheap
        self._paths[scope] = (few, now)
        return few

    def _count_few(self, conn: psycopg.Connection[Any], scope: ScopeFilter) -> bool:
        """Fewer than EXACT_BELOW rows in `scope` (reads at most that many ids)."""
        where, params = scope_condition(scope)
        statement = sql.SQL(ROWS_IN_SCOPE).format(
            table=self._table, where=where, cap=sql.Literal(EXACT_BELOW)
        )
        row = conn.execute(statement, params).fetchone()
        return row is not None and int(row[0]) < EXACT_BELOW

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        wanted = sorted(set(chunk_ids))
        if not wanted:
            return []
        budget_s = search_budget_s(self.name, deadline, self.timeout_s)
        statement = sql.SQL("SELECT {} FROM {} WHERE chunk_id = ANY(%s::text[])").format(
            chunk_columns(), self._table
        )
        with (
            pg_errors(self.name, "get", deadline),
            self._conn(deadline) as conn,
            within(conn, budget_s),
        ):
            return [stored_chunk(row) for row in conn.execute(statement, (wanted,))]

    def vectors(
        self, chunk_ids: Sequence[str], deadline: Deadline, using: str = ""
    ) -> dict[str, list[float]]:
        """The stored vectors (unit length: `upsert` normalises, as Qdrant does)."""
        check_using(self.name, self.second_dim, using)
        wanted = sorted(set(chunk_ids))
        if not wanted:
            return {}
        statement = sql.SQL(
            "SELECT chunk_id, {}::float4[] FROM {} WHERE chunk_id = ANY(%s::text[])"
        ).format(sql.Identifier(VECTOR_COLUMNS[using]), self._table)
        budget_s = self._budget(deadline, "a vectors read")
        with (
            pg_errors(self.name, "vectors", deadline),
            self._conn(deadline) as conn,
            within(conn, budget_s),
        ):
            rows = conn.execute(statement, (wanted,)).fetchall()
        return {row[0]: [float(x) for x in row[1]] for row in rows}

    def scan(self, batch: int = SCAN_BATCH) -> Iterator[list[StoredChunk]]:
        return self._scan_chunks(self._table, batch)

    def count(self, scope: ScopeFilter | None, deadline: Deadline) -> int:
        return self._count_chunks(self._table, scope, deadline)

    # -- lifecycle ------------------------------------------------------------

    def index_progress(self) -> IndexProgress | None:
        """None: pgvector's HNSW index takes every row as it is written."""
        return None

    def optimize(self, *, settle: bool = True) -> bool:
        """PostgreSQL maintains the HNSW index on every write; what a large
        run leaves stale is the planner's statistics, of every table in the
        schema (this store's, the lexical tables, the manifest). Autovacuum
        refreshes them up to a minute later (autovacuum_naptime); until then
        plans are made for the tables as they were (measured on SciFact right
        after a bulk load: vector search p50 195 ms, 89 ms once analysed).
        So after a run, every table changed by more than a tenth since its
        last statistics is analysed now (`settle` or not: it costs a
        fraction of the run); True if any was."""
        with pg_errors(self.name, "analyze"), self._conn() as conn:
            stale = conn.execute(STALE_TABLES, (self.schema,)).fetchall()
            for (table,) in stale:
                conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(self.schema, table)))
        return bool(stale)


def unit_length(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to length 1 (cosine scores do not change); zero stays zero."""
    norm = math.sqrt(sum(float(x) * float(x) for x in vector))
    return [float(x) / norm for x in vector] if norm else [float(x) for x in vector]
