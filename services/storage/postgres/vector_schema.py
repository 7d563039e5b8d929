"""The pgvector table of the PostgreSQL vector store (`postgres_vectors`):
its DDL, and what the server and the model must offer before it is used
(pgvector 0.8 for iterative index scans, at most 2,000 dimensions for HNSW,
the right to create the extension)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from services.core.errors import ConfigError
from services.storage.postgres.sql import CHUNK_COLUMNS_DDL, STORE_INFO_DDL, ensure_schema

MAX_HNSW_DIM = 2000
MIN_PGVECTOR = (0, 8)

_DDL = (
    STORE_INFO_DDL
    + """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS {vectors} ("""
    + CHUNK_COLUMNS_DDL
    + """,
    embedding vector({dim}) NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_hnsw ON {vectors} USING hnsw (embedding vector_cosine_ops);
CREATE INDEX IF NOT EXISTS vectors_scope ON {vectors} (scope_id, locale);
CREATE INDEX IF NOT EXISTS vectors_doc ON {vectors} (doc_id);
CREATE INDEX IF NOT EXISTS vectors_url ON {vectors} (url);
CREATE INDEX IF NOT EXISTS vectors_meta ON {vectors} USING gin (meta);
CREATE INDEX IF NOT EXISTS vectors_generation ON {vectors} (generation);
"""
)


# The second vector (base.SECOND_VECTOR, RAG_CROSS_LINGUAL_MODEL): a column
# and an HNSW index of its own, added where a store is opened with one (the
# manifest's model record refuses an index whose rows were written without it).
_SECOND_DDL = """
ALTER TABLE {vectors} ADD COLUMN IF NOT EXISTS cross_lingual vector({second_dim});
CREATE INDEX IF NOT EXISTS vectors_cross_lingual_hnsw ON {vectors}
    USING hnsw (cross_lingual vector_cosine_ops);
"""


def schema_ddl(schema: str, dim: int, second_dim: int = 0) -> sql.Composed:
    return sql.SQL(_DDL + (_SECOND_DDL if second_dim else "")).format(
        info=sql.Identifier(schema, "store_info"),
        vectors=sql.Identifier(schema, "vectors"),
        dim=sql.Literal(dim),
        second_dim=sql.Literal(second_dim),
    )


def create_schema(
    conn: psycopg.Connection[Any], schema: str, dim: int, second_dim: int = 0
) -> None:
    try:
        ensure_schema(conn, schema, schema_ddl(schema, dim, second_dim))
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigError(
            f"the POSTGRES_URL role may not create the pgvector extension or schema {schema!r} "
            f"({exc}): run `CREATE EXTENSION vector;` once as a superuser (or grant CREATE on "
            "the database), then start again"
        ) from exc


def check_pgvector(conn: psycopg.Connection[Any]) -> None:
    """Filtered search needs pgvector's iterative index scans (0.8.0)."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    version = tuple(int(part) for part in str(row[0] if row else "0").split(".")[:2])
    if version < MIN_PGVECTOR:
        raise ConfigError(
            f"PostgreSQL mode needs pgvector >= 0.8 (iterative index scans keep filtered "
            f"searches full), but the server has {row[0] if row else 'none'}: "
            "ALTER EXTENSION vector UPDATE after installing a newer pgvector"
        )


def check_dim(dim: int) -> None:
    """pgvector's HNSW index takes `vector` columns of at most 2,000 dimensions."""
    if not 1 <= dim <= MAX_HNSW_DIM:
        raise ConfigError(
            f"PostgreSQL mode indexes vectors of 1..{MAX_HNSW_DIM} dimensions (pgvector HNSW), "
            f"but the embedding model has {dim}: use a smaller model or the Qdrant stores"
        )
