"""The lexical search as the PostgreSQL store runs it: the best `k` chunks by
BM25, ranked exactly as `postgres_bm25.search_statement` ranks them (the
reference, kept for the tests), at a fraction of its cost.

Where the reference spent its time, on SciFact's long questions (12,508
chunks, about 5,000 postings per question), and what this search does instead:

- Every chunk that matched any word was looked up in `chunks` to apply the
  filter before sorting (4,000 primary-key lookups for one question). Here
  chunks are scored first and filtered in score order (a LATERAL lookup per
  chunk, stopped by the LIMIT): about `k` lookups when the scope holds most
  of the index, as many as needed when it holds less.
- The planner expects a few dozen postings per term where common words have
  thousands, so it grouped them by sorting on chunk_id; grouping by hash is
  chosen here (`enable_sort` off inside the search's transaction).
- A phrase was read from its first word's postings, positions included
  (1,600 heap rows for the `0` of `0-dimensional`); here from its rarest
  word's, the others looked up by primary key, and not at all in a field
  missing one of its words (`postgres_bm25.phrase_and_identifier_parts`).
- Constants were numeric, so each posting's arithmetic was numeric; all
  float8 now (in the reference too: the values are the same).

Term weights (`boost * idf`) and average field lengths are computed once per
search from `term_stats` and `corpus`, read by a first statement in the same
REPEATABLE READ transaction, so both statements see one snapshot.

Top-k pruning in the style of MaxScore (per-term score bounds, a threshold
from the rarest terms, the common terms' postings skipped and completed by
lookups) was built and measured here (docs/postgres.md, "Lexical search"): at
the depth a `Retrieve` asks (50) the threshold stays below the sum of the
common terms' bounds, so most candidates survive and completing them cost
three times the scan it saved.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from services.core.analysis import QueryPlan
from services.core.models import ScopeFilter
from services.storage.postgres.bm25 import (
    FIELD_CODES,
    hits_statement,
    phrase_and_identifier_parts,
    saturation,
    tables,
)
from services.storage.postgres.sql import limit_statement_time


@dataclass(frozen=True)
class Clause:
    """One query term in one field, weighted."""

    field: int
    term: str
    weight: float  # boost * idf
    avglen: float


@dataclass(frozen=True)
class QueryStats:
    """What a search reads first: its clauses, and every query word's
    document frequency per field (phrase words included)."""

    clauses: list[Clause]
    df: dict[tuple[int, str], int]


def idf(docs: int, df: int) -> float:
    """As the reference computes it (`postgres_bm25._IDF`)."""
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


@contextmanager
def one_snapshot(conn: psycopg.Connection[Any], seconds: float | None) -> Iterator[None]:
    """A read-only transaction whose statements all see one snapshot, group
    by hashing, and end after `seconds` (None: the connection's own limit)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute("SELECT set_config('enable_sort', 'off', true)")
        if seconds is not None:
            limit_statement_time(conn, seconds)
        yield


_STATS = (
    "SELECT c.docs, c.lens, q.field, q.term, t.df FROM {corpus} c "
    "CROSS JOIN unnest(%s::int2[], %s::text[]) AS q(field, term) "
    "JOIN {term_stats} t ON t.field = q.field AND t.term = q.term WHERE c.id = 1 AND t.df > 0"
)


def read_stats(
    conn: psycopg.Connection[Any], schema: str, plan: QueryPlan, boosts: Mapping[str, float]
) -> QueryStats:
    words = set(plan.terms) | {word for phrase in plan.phrases for _, word in phrase}
    pairs = sorted({(FIELD_CODES[field], word) for field in boosts for word in words})
    if not pairs:
        return QueryStats([], {})
    rows = conn.execute(
        sql.SQL(_STATS).format(**tables(schema)), ([f for f, _ in pairs], [w for _, w in pairs])
    ).fetchall()
    found = {(row[2], row[3]): row for row in rows}
    clauses = []
    for field, boost in boosts.items():
        for term in plan.terms:  # a repeated term counts again, as in the reference's sum
            row = found.get((FIELD_CODES[field], term))
            if row is not None:
                clauses.append(_clause(row, float(boost)))
    return QueryStats(clauses, {key: int(row[4]) for key, row in found.items()})


def _clause(row: Sequence[Any], boost: float) -> Clause:
    docs, lens, field, term, df = row
    # The reference's arithmetic: greatest(lens / greatest(docs, 1), 1e-9).
    avglen = max(lens[field] / max(docs, 1), 1e-9)
    return Clause(field, term, boost * idf(docs, df), avglen)


def _terms_part(clauses: Sequence[Clause], t: dict[str, Any]) -> tuple[sql.Composed, list[Any]]:
    """Each posting of the clauses with its score."""
    statement = sql.SQL(
        "SELECT p.chunk_id, q.w * {sat} AS score "
        "FROM unnest(%s::int2[], %s::text[], %s::float8[], %s::float8[]) "
        "AS q(field, term, w, avglen) "
        "JOIN {postings} p ON p.field = q.field AND p.term = q.term"
    ).format(sat=saturation("p.tf", "p.len", "q.avglen"), **t)
    params = [
        [c.field for c in clauses],
        [c.term for c in clauses],
        [c.weight for c in clauses],
        [c.avglen for c in clauses],
    ]
    return statement, params


def top_k_statement(
    schema: str,
    plan: QueryPlan,
    boosts: Mapping[str, float],
    stats: QueryStats,
    scope: ScopeFilter,
    k: int,
) -> tuple[sql.Composed, list[Any]] | None:
    """The best `k` chunks in scope (None: nothing can match): scores summed
    per chunk, then chunks filtered in score order until `k` are found."""
    t = tables(schema)
    parts: list[tuple[sql.Composable, list[Any]]] = []
    if stats.clauses:
        parts.append(_terms_part(stats.clauses, t))
    parts += phrase_and_identifier_parts(plan, boosts, t, stats.df)
    if not parts:
        return None
    template = (
        "WITH stats AS (SELECT docs, lens FROM {corpus} WHERE id = 1), hits AS ({hits}) "
        "SELECT {columns}, h.score FROM (SELECT chunk_id, sum(score) AS score FROM hits "
        "GROUP BY chunk_id ORDER BY score DESC, chunk_id) h "
        # LATERAL: a nested loop in score order, which the LIMIT stops.
        "CROSS JOIN LATERAL (SELECT * FROM {chunks} c WHERE c.chunk_id = h.chunk_id "
        "AND {where}) c ORDER BY h.score DESC, h.chunk_id LIMIT %s"
    )
    return hits_statement(template, parts, t, plan, scope, k)


def search_top_k(
    conn: psycopg.Connection[Any],
    schema: str,
    plan: QueryPlan,
    boosts: Mapping[str, float],
    scope: ScopeFilter,
    k: int,
) -> list[tuple[Any, ...]]:
    """The reference's rows (`postgres_bm25.search_statement`). Call inside
    `one_snapshot`."""
    stats = read_stats(conn, schema, plan, boosts)
    built = top_k_statement(schema, plan, boosts, stats, scope, k)
    if built is None:
        return []
    statement, params = built
    return conn.execute(statement, params).fetchall()
