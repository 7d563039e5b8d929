"""The conformance suite on the embedded stores (Qdrant Edge, tantivy), and
the second named vector on Qdrant Edge."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from services.core.errors import StoreError, StoreUnavailable
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


@pytest.mark.parametrize("kind", ["vector", "lexical"])
def test_a_store_whose_folder_is_removed_is_unavailable(
    tmp_path: Path,
    kind: str,
    embedded_vector_factory: StoreFactory,
    embedded_lexical_factory: StoreFactory,
) -> None:
    """Probe: the data directory removed under a running stack; its open
    files kept answering (health SERVING, `verify` clean) while every write
    failed, and a restart came up on an empty index."""
    factory = embedded_vector_factory if kind == "vector" else embedded_lexical_factory
    store = factory.open(tmp_path / kind)
    try:
        store.ping()
        shutil.rmtree(tmp_path / kind)
        with pytest.raises(StoreUnavailable, match="is gone"):
            store.ping()
    finally:
        with contextlib.suppress(StoreError):  # its files are gone: a flush cannot succeed
            store.close()
