"""Store factories the conformance suite runs against.

Embedded stores always run. Server implementations plug in by appending a
`StoreFactory` to `SERVER_VECTOR_FACTORIES` / `SERVER_LEXICAL_FACTORIES` with
`requires_env=("QDRANT_URL",)` (or `("OPENSEARCH_URL",)`); without a live
server those params are skipped and `pytest -rs` prints the reason. A test
module then binds a contract to them, e.g.

    class TestQdrantServerConformance(VectorStoreContract):
        @pytest.fixture
        def factory(self, server_vector_factory):
            return server_vector_factory

`env` gives a test the store settings' environment with none of their
variables set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from services.storage.embedded.qdrant_edge import EdgeVectorStore
from services.storage.embedded.tantivy_store import TantivyLexicalStore
from tests.storage.harness import DIM, StoreFactory, factory_params
from tests.storage.store_env import store_variables


def _open_edge(path: Path) -> EdgeVectorStore:
    return EdgeVectorStore(path, DIM)


EMBEDDED_VECTOR_FACTORIES = [StoreFactory("qdrant-edge", "vector", _open_edge)]
EMBEDDED_LEXICAL_FACTORIES = [StoreFactory("tantivy", "lexical", TantivyLexicalStore)]

# Placeholders for the server adapters (QdrantVectorStore, OpenSearchLexicalStore).
SERVER_VECTOR_FACTORIES: list[StoreFactory] = []
SERVER_LEXICAL_FACTORIES: list[StoreFactory] = []


@pytest.fixture(
    scope="session", params=factory_params(EMBEDDED_VECTOR_FACTORIES, none_reason="none")
)
def embedded_vector_factory(request: pytest.FixtureRequest) -> StoreFactory:
    return request.param


@pytest.fixture(
    scope="session", params=factory_params(EMBEDDED_LEXICAL_FACTORIES, none_reason="none")
)
def embedded_lexical_factory(request: pytest.FixtureRequest) -> StoreFactory:
    return request.param


@pytest.fixture(
    scope="session",
    params=factory_params(
        SERVER_VECTOR_FACTORIES, none_reason="no server vector store factory registered"
    ),
)
def server_vector_factory(request: pytest.FixtureRequest) -> StoreFactory:
    return request.param


@pytest.fixture(
    scope="session",
    params=factory_params(
        SERVER_LEXICAL_FACTORIES, none_reason="no server lexical store factory registered"
    ),
)
def server_lexical_factory(request: pytest.FixtureRequest) -> StoreFactory:
    return request.param


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A clean slate: none of the store variables set (the CI may set some)."""
    for name in store_variables():
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
