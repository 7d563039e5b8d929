"""The conformance suite on the server stores (Qdrant server, OpenSearch).

The server classes run only against live servers: set QDRANT_URL and/or
OPENSEARCH_URL (plus credentials if the cluster needs them; deploy/README.md
shows how to start both with docker compose). Otherwise they are skipped and
`pytest -rs` prints the reason. Each test gets its own collection / index
(named after its tmp path) and drops it afterwards, so runs never see each
other's data. `TestQdrantAdapterOnLocalEngine` always runs (see its docstring).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from services.runtime.settings import load_settings
from services.storage.server.opensearch import OpenSearchLexicalStore
from services.storage.server.opensearch_client import connect_opensearch
from services.storage.server.qdrant import QdrantVectorStore, connect_qdrant
from services.storage.settings import RefreshPolicy, StoreSettings
from tests.storage.conformance import LexicalStoreContract, VectorStoreContract
from tests.storage.harness import DIM, StoreFactory, factory_params
from tests.storage.query_safety import LexicalQuerySafetyContract

pytestmark = pytest.mark.integration
SERVER_URLS = ("QDRANT_URL", "OPENSEARCH_URL")


def _settings() -> StoreSettings:
    # Only one of the servers may be up: fill in the other URL so that the
    # mode check passes; its store is never opened then.
    urls = {name: os.environ.get(name) or "http://unused.invalid" for name in SERVER_URLS}
    return load_settings(StoreSettings, store_mode="server", **urls)


def _name(path: Path) -> str:
    return "rag-conformance-" + hashlib.sha256(str(path).encode()).hexdigest()[:16]


def _open_qdrant(path: Path) -> QdrantVectorStore:
    return QdrantVectorStore(connect_qdrant(_settings()), _name(path), DIM)


def _drop_qdrant(path: Path) -> None:
    client = connect_qdrant(_settings())
    client.delete_collection(_name(path))
    client.close()


def _open_opensearch(path: Path) -> OpenSearchLexicalStore:
    settings = _settings()
    # A single test node cannot place replicas; wait_for keeps production's visibility rule.
    return OpenSearchLexicalStore(
        connect_opensearch(settings),
        _name(path),
        refresh=RefreshPolicy.WAIT_FOR,
        replicas=0,
        timeout_s=settings.opensearch_timeout_s,
    )


def _drop_opensearch(path: Path) -> None:
    client = connect_opensearch(_settings())
    client.indices.delete(index=_name(path), ignore_unavailable=True)
    client.indices.delete_index_template(name=f"{_name(path)}-template", ignore=[404])
    client.close()


QDRANT = StoreFactory("qdrant-server", "vector", _open_qdrant, ("QDRANT_URL",), _drop_qdrant)
OPENSEARCH = StoreFactory(
    "opensearch", "lexical", _open_opensearch, ("OPENSEARCH_URL",), _drop_opensearch
)


def _open_on_local_engine(path: Path) -> QdrantVectorStore:
    return QdrantVectorStore(QdrantClient(path=str(path)), "rag_chunks", DIM)


LOCAL_ENGINE = StoreFactory("qdrant-client-local", "vector", _open_on_local_engine)


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")
@pytest.mark.filterwarnings("ignore:Local mode performs exact")  # hnsw_ef: no HNSW locally
class TestQdrantAdapterOnLocalEngine(VectorStoreContract):
    """Always runs: QdrantVectorStore's own logic (payload layout, filters,
    batching, skipping missing points, tie order, closing) on the local engine
    that qdrant-client ships for tests (`QdrantClient(path=...)`, the Qdrant
    API implemented in Python). What it cannot show, the wire format and the
    server engine, is covered by test_qdrant_requests.py and the live run."""

    @pytest.fixture(params=factory_params([LOCAL_ENGINE], none_reason="unreachable"))
    def factory(self, request: pytest.FixtureRequest) -> StoreFactory:
        return request.param


class TestQdrantServerConformance(VectorStoreContract):
    @pytest.fixture(params=factory_params([QDRANT], none_reason="unreachable"))
    def factory(self, request: pytest.FixtureRequest) -> StoreFactory:
        return request.param


class TestOpenSearchConformance(LexicalStoreContract):
    @pytest.fixture(params=factory_params([OPENSEARCH], none_reason="unreachable"))
    def factory(self, request: pytest.FixtureRequest) -> StoreFactory:
        return request.param


class TestOpenSearchQuerySafety(LexicalQuerySafetyContract):
    @pytest.fixture(params=factory_params([OPENSEARCH], none_reason="unreachable"))
    def factory(self, request: pytest.FixtureRequest) -> StoreFactory:
        return request.param
