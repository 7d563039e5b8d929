"""The conformance suite on the embedded stores (Qdrant Edge, tantivy), and
the second named vector on Qdrant Edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.storage.embedded.qdrant_edge import EdgeVectorStore
from tests.storage.conformance import LexicalStoreContract, VectorStoreContract
from tests.storage.harness import DIM, StoreFactory
from tests.storage.second_vector_contract import OpenStore, SecondVectorContract

pytestmark = pytest.mark.integration


class TestEdgeVectorStoreConformance(VectorStoreContract):
    @pytest.fixture
    def factory(self, embedded_vector_factory: StoreFactory) -> StoreFactory:
        return embedded_vector_factory


class TestTantivyLexicalStoreConformance(LexicalStoreContract):
    @pytest.fixture
    def factory(self, embedded_lexical_factory: StoreFactory) -> StoreFactory:
        return embedded_lexical_factory


class TestEdgeSecondVector(SecondVectorContract):
    @pytest.fixture
    def open_store(self) -> OpenStore:
        def open_edge(path: Path, second_dim: int) -> EdgeVectorStore:
            return EdgeVectorStore(path, DIM, second_dim=second_dim)

        return open_edge
