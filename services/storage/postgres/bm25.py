"""The lexical store's search statement: BM25 from term statistics in tables.

PostgreSQL's own full-text search (`tsvector`, `ts_rank_cd`) would re-analyse
text with its parsers and rank without document frequencies; instead the
store keeps the shared analyzer's token stream (`services.core.analysis`,
Chinese segmented by jieba exactly as for tantivy and OpenSearch) as
postings, and the statistics BM25 needs beside them:

- `postings(term, field, chunk_id, tf, len, positions)`: one row per term per
  field of a chunk, with the field's length in terms and the term's positions;
- `term_stats(field, term, df)`: how many chunks hold the term in the field;
- `corpus(docs, lens)`: the number of chunks and each field's total length.

Scoring is the one in `lexical_fields`, as tantivy computes it: per field
and query term `boost * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len /
avglen))`, `idf = ln(1 + (N - df + 0.5) / (df + 0.5))`, summed; a phrase
scores the same way with its frequency as `tf` and the sum of its words'
idf; `EXACT_BOOST` per query identifier the chunk holds. Statistics cover
every row (like an index's), so filters narrow hits without moving scores.
Unlike tantivy, lengths are exact (tantivy quantises them to one byte), so
scores differ from tantivy's in the last digits, not in kind.

Values (terms, words, identifiers, filter values, the limit) are bound
parameters; only field codes, offsets and constants are literals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

from psycopg import sql

from services.core.analysis import QueryPlan
from services.core.models import ScopeFilter
from services.storage.lexical_fields import EXACT_BOOST
from services.storage.postgres.sql import chunk_columns, scope_condition

K1 = 1.2
B = 0.75
# Field codes in the postings table; `corpus.lens` holds their lengths in this order.
FIELD_CODES = {"title": 0, "heading_path": 1, "text": 2}

Part = tuple[sql.Composable, list[Any]]


def tables(schema: str) -> dict[str, sql.Identifier]:
    names = ("chunks", "postings", "term_stats", "corpus")
    return {name: sql.Identifier(schema, name) for name in names}


def _saturation(tf: str, length: str, field: str) -> sql.Composable:
    """`saturation` with avglen from the `stats` row `s`."""
    avglen = f"greatest(s.lens[{field} + 1]::float8 / greatest(s.docs, 1), 1e-9)"
    return saturation(tf, length, avglen)


def saturation(tf: str, length: str, avglen: str) -> sql.Composable:
    """`tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))`."""
    template = "{tf} * {k1_plus} / ({tf} + {k1} * ({one_minus_b} + {b} * {length} / {avglen}))"
    return sql.SQL(template).format(
        tf=sql.SQL(tf),
        length=sql.SQL(length),
        avglen=sql.SQL(avglen),
        k1=float8(K1),
        k1_plus=float8(K1 + 1),
        b=float8(B),
        one_minus_b=float8(1 - B),
    )


def float8(value: float) -> sql.Composable:
    """A constant typed float8: a bare `0.75` is numeric in PostgreSQL, and
    numeric arithmetic per posting is several times slower."""
    return sql.SQL(repr(float(value)) + "::float8")


# float8 throughout: `bigint + 0.5` would be numeric, whose ln() cost 3/4 of a
# SciFact query's time.
_IDF = "ln(1.0::float8 + (s.docs - {df} + 0.5::float8) / ({df} + 0.5::float8))"


def _terms_part(plan: QueryPlan, boosts: Mapping[str, float], t: dict[str, Any]) -> Part:
    """Every query term in every weighted field."""
    fields, terms, weights = [], [], []
    for field, boost in boosts.items():
        for term in plan.terms:
            fields.append(FIELD_CODES[field])
            terms.append(term)
            weights.append(float(boost))
    statement = sql.SQL(
        "SELECT p.chunk_id, q.boost * " + _IDF.format(df="t.df") + " * {sat} AS score "
        "FROM unnest(%s::int2[], %s::text[], %s::float8[]) AS q(field, term, boost) "
        "JOIN {term_stats} t ON t.field = q.field AND t.term = q.term "
        "JOIN {postings} p ON p.field = q.field AND p.term = q.term CROSS JOIN stats s"
    ).format(sat=_saturation("p.tf", "p.len", "p.field"), **t)
    return statement, [fields, terms, weights]


def _phrase_joins(
    phrase: Sequence[tuple[int, str]], anchor: int, code: sql.Composable, t: dict[str, Any]
) -> tuple[list[sql.Composable], list[sql.Composable], list[Any]]:
    """A postings lookup per word other than the anchor (`p0`), and the check
    that it sits at its offset from the anchor."""
    origin = phrase[anchor][0]
    joins: list[sql.Composable] = []
    checks: list[sql.Composable] = []
    params: list[Any] = []
    others = [word for i, word in enumerate(phrase) if i != anchor]
    for i, (offset, word) in enumerate(others, start=1):
        alias = sql.Identifier(f"p{i}")
        # LATERAL: one primary-key lookup per anchor posting, never a scan of
        # a common word's postings (with their positions, read from the heap).
        joins.append(
            sql.SQL(
                "CROSS JOIN LATERAL (SELECT positions FROM {postings} WHERE chunk_id = "
                "p0.chunk_id AND field = {code} AND term = %s) {a}"
            ).format(a=alias, code=code, **t)
        )
        checks.append(
            sql.SQL("(x.pos + {d}) = ANY({a}.positions)").format(
                d=sql.Literal(offset - origin), a=alias
            )
        )
        params.append(word)
    return joins, checks, params


def _phrase_part(
    phrase: Sequence[tuple[int, str]],
    field: str,
    boost: float,
    t: dict[str, Any],
    anchor: int = 0,
) -> Part:
    """Chunks holding the phrase's words at their relative offsets in `field`,
    found from the postings of its word `anchor` (best: the rarest)."""
    code = sql.Literal(FIELD_CODES[field])
    joins, checks, params = _phrase_joins(phrase, anchor, code, t)
    statement = sql.SQL(
        "SELECT p0.chunk_id, {boost} * w.idf * {sat} AS score FROM {postings} p0 {joins} "
        "CROSS JOIN stats s "
        "CROSS JOIN LATERAL (SELECT count(*) AS tf FROM unnest(p0.positions) AS x(pos) "
        "WHERE {checks}) ph "
        "CROSS JOIN (SELECT sum(" + _IDF.format(df="t.df") + ") AS idf "
        "FROM unnest(%s::text[]) AS u(term) JOIN {term_stats} t "
        "ON t.field = {code} AND t.term = u.term CROSS JOIN stats s) w "
        "WHERE p0.field = {code} AND p0.term = %s AND ph.tf > 0"
    ).format(
        boost=float8(boost),
        sat=_saturation("ph.tf", "p0.len", str(FIELD_CODES[field])),
        joins=sql.SQL(" ").join(joins),
        checks=sql.SQL(" AND ").join(checks) if checks else sql.SQL("TRUE"),
        code=code,
        **t,
    )
    return statement, [*params, [word for _, word in phrase], phrase[anchor][1]]


def _identifiers_part(identifiers: Sequence[str], t: dict[str, Any]) -> Part:
    """A constant EXACT_BOOST per query identifier the chunk holds exactly."""
    statement = sql.SQL(
        "SELECT c.chunk_id, {boost} * (SELECT count(DISTINCT i.x) FROM unnest(%s::text[]) "
        "AS i(x) WHERE i.x = ANY(c.identifiers)) AS score "
        "FROM {chunks} c WHERE c.identifiers && %s::text[]"
    ).format(boost=sql.Literal(EXACT_BOOST), **t)
    return statement, [list(identifiers), list(identifiers)]


def _parts(plan: QueryPlan, boosts: Mapping[str, float], t: dict[str, Any]) -> list[Part]:
    parts: list[Part] = []
    if plan.terms:
        parts.append(_terms_part(plan, boosts, t))
    return parts + phrase_and_identifier_parts(plan, boosts, t)


def phrase_and_identifier_parts(
    plan: QueryPlan,
    boosts: Mapping[str, float],
    t: dict[str, Any],
    df: Mapping[tuple[int, str], int] | None = None,
) -> list[Part]:
    """The parts scored apart from the plain terms (they read `stats`).
    With the words' document frequencies per field (`df`), each phrase is
    read from its rarest word, and left out of a field missing one of its
    words (it cannot match there)."""
    parts: list[Part] = []
    for phrase in plan.phrases:
        for field, boost in boosts.items():
            if df is None:
                parts.append(_phrase_part(phrase, field, boost, t))
                continue
            counts = [df.get((FIELD_CODES[field], word), 0) for _, word in phrase]
            if min(counts) > 0:
                anchor = counts.index(min(counts))
                parts.append(_phrase_part(phrase, field, boost, t, anchor))
    if plan.identifiers:
        parts.append(_identifiers_part(plan.identifiers, t))
    return parts


def search_statement(
    schema: str,
    plan: QueryPlan,
    boosts: Mapping[str, float],
    scope: ScopeFilter,
    limit: int,
) -> tuple[sql.Composed, list[Any]]:
    """The whole search: scored hits summed per chunk, filtered, best first
    (ties by chunk_id). The plan must not be empty. Rows are the first
    phase's (partial) unless the query has identifiers: a hit's `exact` is
    read from its text."""
    t = tables(schema)
    template = (
        "WITH stats AS (SELECT docs, lens FROM {corpus} WHERE id = 1), "
        "hits AS ({hits}) "
        "SELECT {columns}, h.score FROM (SELECT chunk_id, sum(score) AS score FROM hits "
        "GROUP BY chunk_id) h JOIN {chunks} c ON c.chunk_id = h.chunk_id "
        "WHERE {where} ORDER BY h.score DESC, c.chunk_id LIMIT %s"
    )
    return hits_statement(template, _parts(plan, boosts, t), t, plan, scope, limit)


def hits_statement(
    template: LiteralString,
    parts: Sequence[Part],
    t: dict[str, Any],
    plan: QueryPlan,
    scope: ScopeFilter,
    limit: int,
) -> tuple[sql.Composed, list[Any]]:
    """`template` filled in: `{hits}` the parts' union, `{columns}` the chunk
    columns of alias `c`, `{where}` the scope on `c`, `%s` the limit last."""
    where, filter_params = scope_condition(scope, "c")
    statement = sql.SQL(template).format(
        hits=sql.SQL(" UNION ALL ").join(part for part, _ in parts),
        columns=chunk_columns("c", search=not plan.identifiers),
        where=where,
        **t,
    )
    params = [value for _, part_params in parts for value in part_params]
    return statement, [*params, *filter_params, limit]
