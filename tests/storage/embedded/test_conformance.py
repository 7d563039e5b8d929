"""The conformance suite on the embedded stores (Qdrant Edge, tantivy)."""

from __future__ import annotations

import pytest

from tests.storage.conformance import LexicalStoreContract, VectorStoreContract
from tests.storage.harness import StoreFactory

pytestmark = pytest.mark.integration


class TestEdgeVectorStoreConformance(VectorStoreContract):
    @pytest.fixture
    def factory(self, embedded_vector_factory: StoreFactory) -> StoreFactory:
        return embedded_vector_factory


class TestTantivyLexicalStoreConformance(LexicalStoreContract):
    @pytest.fixture
    def factory(self, embedded_lexical_factory: StoreFactory) -> StoreFactory:
        return embedded_lexical_factory
