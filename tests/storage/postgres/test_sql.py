"""Pinned SQL of the PostgreSQL stores, where the statement's shape matters.

Like the pinned request bodies of test_opensearch_requests.py: the search
statements are compared whole (values stay bound parameters, so user text is
never SQL), the writes are traced on a real server in the order they run
(the `corpus` row lock first: writers queue there and never deadlock on term
rows), and the planner is asked whether the indexes that make the statements
fast are the ones it uses.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from services.core.analysis import QueryPlan, TextAnalyzer
from services.core.models import ScopeFilter
from services.storage.base import SearchEf, unrequested_deadline
from services.storage.postgres.bm25 import search_statement as bm25_statement
from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.postgres.vectors import (
    EXACT_BELOW,
    ROW_ESTIMATE,
    SEARCH_SETTINGS,
    PostgresVectorStore,
    search_statement,
    upsert_statement,
)
from tests.storage.harness import make_chunk, payload_of, seeded_vector
from tests.support.postgres import PostgresServer, drop_schema, running_postgres

pytestmark = pytest.mark.integration

COLUMNS = (
    '"chunk_id", "doc_id", "position", "text", "url", "title", "heading_path", '
    '"scope_id", "locale", "content_hash", "meta", "generation"'
)
# A search's first phase: the other columns are read by `get` (two-phase fetch).
SEARCH_COLUMNS = (
    '"chunk_id", "doc_id", "position", NULL, NULL, NULL, NULL, '
    '"scope_id", "locale", NULL, "meta", "generation"'
)
EVERY_FILTER = ScopeFilter(
    scope_id="site-a",
    locale="en",
    doc_ids=("d1", "d2"),
    urls=("https://x.test/",),
    metadata=(("product", "api"), ("a=b", "c")),
    visible_generation=7,
)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def test_vector_search_filters_in_the_knn_query_and_breaks_ties_by_chunk_id() -> None:
    statement, params = search_statement(sql.Identifier("rag", "vectors"), EVERY_FILTER)
    assert statement.as_string() == (
        f"SELECT * FROM (SELECT {SEARCH_COLUMNS}, "
        '1 - ("embedding" <=> %b::float4[]::vector) AS score '
        'FROM "rag"."vectors" WHERE "scope_id" = %s AND "locale" = %s AND '
        '"doc_id" = ANY(%s::text[]) AND "url" = ANY(%s::text[]) AND "meta" @> %s::text[] '
        'AND "generation" <= %s ORDER BY "embedding" <=> %b::float4[]::vector LIMIT %s) AS knn '
        "ORDER BY score DESC, chunk_id"
    )
    # The vector and the limit are added by the store around the filter's values.
    assert params == [
        "site-a",
        "en",
        ["d1", "d2"],
        ["https://x.test/"],
        ["product=api", "a%3Db=c"],
        7,
    ]


def test_an_empty_scope_is_no_condition() -> None:
    statement, params = search_statement(sql.Identifier("rag", "vectors"), ScopeFilter())
    assert " WHERE TRUE ORDER BY" in statement.as_string() and params == []


def test_vector_upsert_is_one_insert_on_conflict_per_row() -> None:
    assert upsert_statement(sql.Identifier("rag", "vectors")).as_string() == (
        f'INSERT INTO "rag"."vectors" ({COLUMNS}, "embedding") VALUES '
        "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %b::float4[]::vector) "
        'ON CONFLICT (chunk_id) DO UPDATE SET "doc_id" = EXCLUDED."doc_id", '
        '"position" = EXCLUDED."position", "text" = EXCLUDED."text", "url" = EXCLUDED."url", '
        '"title" = EXCLUDED."title", "heading_path" = EXCLUDED."heading_path", '
        '"scope_id" = EXCLUDED."scope_id", "locale" = EXCLUDED."locale", '
        '"content_hash" = EXCLUDED."content_hash", "meta" = EXCLUDED."meta", '
        '"generation" = EXCLUDED."generation", "embedding" = EXCLUDED."embedding"'
    )


# Constants typed float8 (a bare 0.75 is numeric, slow per posting).
SATURATION = (
    "* 2.2::float8 / ({tf} + 1.2::float8 * (0.25::float8 + 0.75::float8 * {length} / "
    "greatest(s.lens[{field} + 1]::float8 / greatest(s.docs, 1), 1e-9)))"
)
IDF = "ln(1.0::float8 + (s.docs - t.df + 0.5::float8) / (t.df + 0.5::float8))"


PINNED_TERMS = (
    f"SELECT p.chunk_id, q.boost * {IDF} * p.tf "
    + SATURATION.format(tf="p.tf", length="p.len", field="p.field")
    + " AS score FROM unnest(%s::int2[], %s::text[], %s::float8[]) AS q(field, term, boost) "
    'JOIN "rag"."term_stats" t ON t.field = q.field AND t.term = q.term '
    'JOIN "rag"."postings" p ON p.field = q.field AND p.term = q.term CROSS JOIN stats s'
)
PINNED_PHRASE = (
    "SELECT p0.chunk_id, 1.0::float8 * w.idf * ph.tf "
    + SATURATION.format(tf="ph.tf", length="p0.len", field="2")
    + ' AS score FROM "rag"."postings" p0 CROSS JOIN LATERAL (SELECT positions FROM '
    '"rag"."postings" WHERE chunk_id = p0.chunk_id AND field = 2 AND term = %s) "p1" '
    "CROSS JOIN stats s CROSS JOIN LATERAL (SELECT count(*) AS tf FROM "
    'unnest(p0.positions) AS x(pos) WHERE (x.pos + 1) = ANY("p1".positions)) ph '
    f"CROSS JOIN (SELECT sum({IDF}) AS idf FROM unnest(%s::text[]) AS u(term) "
    'JOIN "rag"."term_stats" t ON t.field = 2 AND t.term = u.term CROSS JOIN stats s) w '
    "WHERE p0.field = 2 AND p0.term = %s AND ph.tf > 0"
)
PINNED_IDENTIFIERS = (
    "SELECT c.chunk_id, 1000.0 * (SELECT count(DISTINCT i.x) FROM unnest(%s::text[]) "
    "AS i(x) WHERE i.x = ANY(c.identifiers)) AS score "
    'FROM "rag"."chunks" c WHERE c.identifiers && %s::text[]'
)


def test_bm25_statement_sums_terms_phrases_and_identifiers_then_filters() -> None:
    plan = QueryPlan(("rate",), (((0, "text"), (1, "embed")),), ("text-embedding-v4",))
    statement, params = bm25_statement(
        "rag", plan, {"text": 1.0}, ScopeFilter(scope_id="site-a", visible_generation=3), 10
    )
    columns = ", ".join(f'"c".{name.strip()}' for name in COLUMNS.split(","))
    hits = f"{PINNED_TERMS} UNION ALL {PINNED_PHRASE} UNION ALL {PINNED_IDENTIFIERS}"
    assert statement.as_string() == (
        'WITH stats AS (SELECT docs, lens FROM "rag"."corpus" WHERE id = 1), '
        f"hits AS ({hits}) "
        f"SELECT {columns}, h.score FROM (SELECT chunk_id, sum(score) AS score FROM hits "
        'GROUP BY chunk_id) h JOIN "rag"."chunks" c ON c.chunk_id = h.chunk_id '
        'WHERE "c"."scope_id" = %s AND "c"."generation" <= %s '
        "ORDER BY h.score DESC, c.chunk_id LIMIT %s"
    )
    assert params == [
        *([2], ["rate"], [1.0]),
        *("embed", ["text", "embed"], "text"),
        *(["text-embedding-v4"], ["text-embedding-v4"]),
        *("site-a", 3, 10),
    ]


def test_hostile_text_only_ever_reaches_the_statement_as_parameters() -> None:
    hostile = "'); DROP TABLE rag.chunks; -- title:x \"a"
    plan = TextAnalyzer().plan(hostile)
    statement, params = bm25_statement("rag", plan, {"text": 1.0}, ScopeFilter(), 5)
    rendered = statement.as_string()
    assert "DROP" not in rendered and "'" not in rendered
    assert "drop" in params[1]  # the word travels as a value


# -- on the server: the write trace and the plans --------------------------------


class Trace:
    """Records every statement the stores send, as text, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statements: list[str] = []
        self.params: list[Any] = []
        execute, copy = psycopg.Connection.execute, psycopg.Cursor.copy

        def traced_execute(conn: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if self._record(query, conn):
                self.params.append(args[0] if args else kwargs.get("params"))
            return execute(conn, query, *args, **kwargs)

        def traced_copy(cursor: Any, statement: Any, *args: Any, **kwargs: Any) -> Any:
            if self._record(statement, cursor.connection):
                self.params.append(None)
            return copy(cursor, statement, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "execute", traced_execute)
        monkeypatch.setattr(psycopg.Cursor, "copy", traced_copy)

    def _record(self, query: Any, conn: Any) -> bool:
        """Keep a statement; False for the pool's empty liveness probe."""
        text = " ".join((query if isinstance(query, str) else query.as_string(conn)).split())
        if text:
            self.statements.append(text)
        return bool(text)

    def heads(self) -> list[str]:
        """Each statement's first words up to its table."""
        return [_head(statement) for statement in self.statements]


def _head(statement: str) -> str:
    words = statement.split()
    for i, word in enumerate(words):
        if word.startswith('"t_trace"'):
            return " ".join(words[: i + 1])
    return " ".join(words[:3])


@pytest.fixture
def lexical(postgres: PostgresServer) -> Iterator[PostgresLexicalStore]:
    store = PostgresLexicalStore(postgres.url, "t_trace", pool_size=1)
    yield store
    store.close()
    drop_schema(postgres.url, "t_trace")


def test_a_lexical_write_locks_the_corpus_row_then_replaces_rows_and_counts(
    lexical: PostgresLexicalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunk = make_chunk("doc-1", text="rate limit rate")
    trace = Trace(monkeypatch)
    lexical.upsert([chunk], deadline=unrequested_deadline())
    assert trace.heads() == [
        "SELECT set_config('statement_timeout', %s,",  # the deadline, on the transaction
        'SELECT docs FROM "t_trace"."corpus"',
        'UPDATE "t_trace"."term_stats"',
        'UPDATE "t_trace"."corpus"',
        'DELETE FROM "t_trace"."postings"',
        'DELETE FROM "t_trace"."chunks"',
        'COPY "t_trace"."chunks"',
        'COPY "t_trace"."postings"',
        'INSERT INTO "t_trace"."term_stats"',
        'UPDATE "t_trace"."corpus"',
    ]
    assert trace.statements[1].endswith("WHERE id = 1 FOR UPDATE")
    trace.statements.clear()
    lexical.update_payload(
        [(chunk.chunk_id, payload_of(chunk, title="Renamed"))], deadline=unrequested_deadline()
    )
    assert trace.heads()[:3] == [
        "SELECT set_config('statement_timeout', %s,",
        'SELECT docs FROM "t_trace"."corpus"',
        f'SELECT {COLUMNS} FROM "t_trace"."chunks"',
    ]


def test_term_statistics_match_the_postings_after_rewrites(
    lexical: PostgresLexicalStore, postgres: PostgresServer
) -> None:
    chunks = [make_chunk(f"doc-{n}", text="rate limit " * (n + 1)) for n in range(5)]
    lexical.upsert(chunks, deadline=unrequested_deadline())
    lexical.upsert(chunks[:2], deadline=unrequested_deadline())
    lexical.update_payload(
        [(chunks[2].chunk_id, payload_of(chunks[2], title="rate"))], deadline=unrequested_deadline()
    )
    lexical.delete([chunks[3].chunk_id], deadline=unrequested_deadline())
    with psycopg.connect(postgres.url) as conn:
        assert _stats_drift(conn, "t_trace") == []


def _stats_drift(conn: psycopg.Connection[Any], schema: str) -> list[Any]:
    """Rows where the kept statistics differ from a recount of the tables."""
    drift = conn.execute(
        f"SELECT field, term, df, n FROM {schema}.term_stats FULL JOIN (SELECT field, term, "
        f"count(*) AS n FROM {schema}.postings GROUP BY field, term) g USING (field, term) "
        "WHERE coalesce(df, 0) <> coalesce(n, 0)"
    ).fetchall()
    corpus = conn.execute(
        f"SELECT c.docs = (SELECT count(*) FROM {schema}.chunks), c.lens = (SELECT "
        f"ARRAY[coalesce(sum(lens[1]), 0), coalesce(sum(lens[2]), 0), "
        f"coalesce(sum(lens[3]), 0)]::bigint[] FROM {schema}.chunks) FROM {schema}.corpus c"
    ).fetchone()
    return [*drift, *([] if corpus == (True, True) else [("corpus", corpus)])]


def test_a_search_under_the_visibility_rule_walks_the_hnsw_index(
    postgres: PostgresServer,
) -> None:
    """Every Retrieve carries the visibility clause (and usually a scope): the
    planner must still walk the HNSW graph, with the iterative scan filling
    the page. (A filter naming two documents rightly uses their b-tree.)"""
    store = PostgresVectorStore(postgres.url, "t_plan", 16, pool_size=1)
    try:
        chunks = [make_chunk(f"doc-{n}", scope_id=f"site-{n % 4}") for n in range(4000)]
        vectors = [seeded_vector(chunk.chunk_id) * 2 for chunk in chunks]
        store.upsert(chunks, vectors, deadline=unrequested_deadline())
        for scope in (
            ScopeFilter(visible_generation=7),
            ScopeFilter(scope_id="site-3", visible_generation=7),
        ):
            assert "Index Scan using vectors_hnsw" in _plan(postgres, scope, vectors[0]), scope
        hits = store.search(
            vectors[0], 5, ScopeFilter(scope_id="site-3"), deadline=unrequested_deadline()
        )
        assert len(hits) == 5 and {hit.chunk.scope_id for hit in hits} == {"site-3"}
    finally:
        store.close()
        drop_schema(postgres.url, "t_plan")


def _plan(postgres: PostgresServer, scope: ScopeFilter, probe: list[float]) -> str:
    statement, params = search_statement(sql.Identifier("t_plan", "vectors"), scope)
    with psycopg.connect(postgres.url, autocommit=True) as conn, conn.transaction():
        conn.execute("ANALYZE t_plan.vectors")
        conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        rows = conn.execute(sql.SQL("EXPLAIN ") + statement, [probe, *params, probe, 10])
        return "\n".join(row[0] for row in rows)


def test_the_schema_records_what_built_it(postgres: PostgresServer, tmp_path: Path) -> None:
    from services.core.errors import ConfigError

    store = PostgresVectorStore(postgres.url, "t_dim", 8, pool_size=1)
    store.close()
    try:
        with pytest.raises(ConfigError, match=r"vector_dim=8, but this service needs 16"):
            PostgresVectorStore(postgres.url, "t_dim", 16, pool_size=1)
        lexical = PostgresLexicalStore(postgres.url, "t_dim", pool_size=1)
        lexical.close()
        with pytest.raises(ConfigError, match="RAG_LEXICAL_CJK"):
            from services.core.analysis import CjkMode

            PostgresLexicalStore(
                postgres.url, "t_dim", analyzer=TextAnalyzer(CjkMode.BIGRAMS), pool_size=1
            )
    finally:
        drop_schema(postgres.url, "t_dim")


def test_a_vector_search_sets_its_scan_then_runs_one_statement(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresVectorStore(postgres.url, "t_trace_v", 8, pool_size=1)
    try:
        store.upsert(
            [make_chunk("doc-1")], [seeded_vector("doc-1")], deadline=unrequested_deadline()
        )
        trace = Trace(monkeypatch)
        store.search(
            seeded_vector("q"), 600, ScopeFilter(scope_id="site-a"), deadline=unrequested_deadline()
        )
        # The statement time: the store's own 5 s (no deadline given), in ms.
        assert trace.statements[0] == "SELECT set_config('statement_timeout', %s, true)"
        assert trace.params[0] == ("5000",)
        # The table's size, which sizes the candidates (read once per 10 s).
        assert trace.statements[1] == " ".join(ROW_ESTIMATE.split())
        assert trace.params[1] == ("t_trace_v",)
        # One row in scope: searched exactly, as the planner plans it.
        assert trace.statements[2].startswith("SELECT count(*) FROM (SELECT 1 FROM")
        assert trace.statements[2].endswith("LIMIT 2000) AS few")
        assert trace.statements[3] == (
            "SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'strict_order', true), "
            "set_config('enable_seqscan', %s, true), set_config('enable_sort', %s, true)"
        )
        # ef 2 x 600, capped at pgvector's 1000; the planner free (exact).
        assert trace.params[3] == ("1000", "on", "on")
        assert trace.statements[4].startswith("SELECT * FROM (SELECT")
        assert len(trace.statements) == 5
    finally:
        store.close()
        drop_schema(postgres.url, "t_trace_v")


def test_a_table_the_planner_counts_large_is_searched_with_more_candidates(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    search_ef = SearchEf(floor=64, growth=0.6, grows_above=100_000)
    store = PostgresVectorStore(postgres.url, "t_ef_v", 8, pool_size=1, search_ef=search_ef)
    try:
        store.upsert(
            [make_chunk("doc-1")], [seeded_vector("doc-1")], deadline=unrequested_deadline()
        )
        # The planner's estimate, as ANALYZE would leave it for a million rows.
        with psycopg.connect(postgres.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE pg_class SET reltuples = 1000000 WHERE oid = 't_ef_v.vectors'::regclass"
            )
        trace = Trace(monkeypatch)
        hits = store.search(seeded_vector("doc-1"), 10, ScopeFilter(), unrequested_deadline())
        assert [hit.chunk.doc_id for hit in hits] == ["doc-1"]
        ef_setting = trace.statements.index(
            next(s for s in trace.statements if "hnsw.ef_search" in s)
        )
        assert trace.params[ef_setting][0] == "255"  # 64 x 10 ** 0.6, rounded up
    finally:
        store.close()
        drop_schema(postgres.url, "t_ef_v")


def _eventually_true(check: Any, within_s: float = 10.0) -> bool:
    """PostgreSQL publishes a backend's table counters when it goes idle (at
    most once a second): poll for them instead of sleeping a fixed time."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_after_a_large_run_statistics_are_fresh_and_searches_take_the_hnsw_index(
    postgres: PostgresServer,
) -> None:
    store = PostgresVectorStore(postgres.url, "t_plan", 8, pool_size=2)
    try:
        chunks = [make_chunk(f"doc-{i}") for i in range(EXACT_BELOW + 500)]
        store.upsert(
            chunks, [seeded_vector(c.chunk_id) for c in chunks], deadline=unrequested_deadline()
        )
        assert _eventually_true(store.optimize)  # 2,500 new rows: analysed now
        assert store.optimize() is False  # nothing changed since
        scope = ScopeFilter(scope_id="site-a", visible_generation=5)
        statement, params = search_statement(sql.Identifier("t_plan", "vectors"), scope)
        probe = seeded_vector("q")
        with psycopg.connect(postgres.url, autocommit=True) as conn, conn.transaction():
            conn.execute(SEARCH_SETTINGS, ("100", "off", "off"))  # as for a large scope
            plan = conn.execute(sql.SQL("EXPLAIN ") + statement, [probe, *params, probe, 10])
            text = "\n".join(row[0] for row in plan)
        assert "Index Scan using vectors_hnsw" in text, text
        exact = sorted(chunks, key=lambda c: -_cosine(seeded_vector(c.chunk_id), probe))
        nearest = [c.chunk_id for c in exact[:10]]
        found = [
            h.chunk.chunk_id
            for h in store.search(probe, 10, scope, deadline=unrequested_deadline())
        ]
        assert len(set(found) & set(nearest)) >= 9  # the graph, approximate
        # A scope of few rows is searched exactly: its true nearest, in order.
        few = ScopeFilter(doc_ids=tuple(c.doc_id for c in exact[500:520]))
        found = [
            h.chunk.chunk_id for h in store.search(probe, 5, few, deadline=unrequested_deadline())
        ]
        assert found == [c.chunk_id for c in exact[500:505]]
    finally:
        store.close()
        drop_schema(postgres.url, "t_plan")


def test_a_scope_is_counted_once_for_its_path_until_a_write_or_a_commit(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exact-or-HNSW choice is not a count per search: a request's
    searches (one per locale) and the next requests reuse it. A SPY around
    the real count (it still runs) tells how often the store counted."""
    store = PostgresVectorStore(postgres.url, "t_paths", 8, pool_size=2)
    counted: list[ScopeFilter] = []
    count = store._count_few

    def spy(conn: Any, scope: ScopeFilter) -> bool:
        counted.append(scope)
        return count(conn, scope)

    monkeypatch.setattr(store, "_count_few", spy)
    try:
        chunks = [make_chunk(f"doc-{i}") for i in range(20)]
        store.upsert(
            chunks, [seeded_vector(c.chunk_id) for c in chunks], deadline=unrequested_deadline()
        )
        scope = ScopeFilter(scope_id="site-a", visible_generation=5)
        probe = seeded_vector("q")
        first = store.search(probe, 5, scope, deadline=unrequested_deadline())
        again = store.search(probe, 5, scope, deadline=unrequested_deadline())
        assert [h.chunk.chunk_id for h in first] == [h.chunk.chunk_id for h in again]
        assert counted == [scope]
        store.search(
            probe, 5, replace(scope, visible_generation=6), deadline=unrequested_deadline()
        )
        assert len(counted) == 2  # a commit moved the generation: counted again
        store.delete([chunks[0].chunk_id], deadline=unrequested_deadline())
        store.search(probe, 5, scope, deadline=unrequested_deadline())
        assert len(counted) == 3  # this store wrote: counted again
    finally:
        store.close()
        drop_schema(postgres.url, "t_paths")


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))
