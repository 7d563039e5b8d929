"""An index remembers its second (cross-lingual) model as it remembers the
first: the Indexer refuses to start on it with another one, or with one
where the index has none (and the reverse), names both and says to re-index;
the same model again is accepted. Real models (MiniLM, mUSE), real embedded
stores."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.core.models import ContentType, Document
from services.embedding.embedder import Embedder, EmbeddingIdentity
from services.indexer.app import build_indexing_pipeline
from services.indexer.settings import IndexerSettings
from services.storage.base import unrequested_deadline
from services.storage.factory import open_storage
from services.storage.manifest import CROSS_LINGUAL_META
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage

pytestmark = pytest.mark.integration


class OtherModel:
    """The real mUSE presented under another identity (test double for a
    different second model: the guard reads only the identity)."""

    def __init__(self, inner: Embedder, identity: EmbeddingIdentity) -> None:
        self.inner, self.identity, self.dim = inner, identity, identity.dim

    def embed_documents(self, texts: list[str], between: object = None) -> object:
        return self.inner.embed_documents(texts, between)  # type: ignore[arg-type]


def index_one(data_dir: Path, embedder: Embedder, second: object | None) -> Storage:
    """Open the index with `second` as its cross-lingual model and index one
    document; the storage stays open for the caller to inspect and close."""
    stores = StoreSettings(data_dir=data_dir, store_mode=StoreMode.EMBEDDED)
    storage = open_storage(stores, embedder.dim, second.dim if second else 0)  # type: ignore[attr-defined]
    storage.second_encoder = second  # type: ignore[assignment]
    try:
        pipeline = build_indexing_pipeline(IndexerSettings(), embedder, storage, second)  # type: ignore[arg-type]
        doc = Document(
            doc_id="a",
            text="Tide tables for the northern harbour.",
            url="https://x.test/a",
            title="Tides",
            scope_id="site",
            content_type=ContentType.MARKDOWN,
        )
        pipeline.upsert([doc])
    except BaseException:
        storage.close()
        raise
    return storage


def test_the_same_second_model_is_accepted_and_recorded(
    tmp_path: Path, embedder: Embedder, muse_embedder: Embedder
) -> None:
    index_one(tmp_path, embedder, muse_embedder).close()
    storage = index_one(tmp_path, embedder, muse_embedder)
    try:
        recorded = json.loads(
            storage.manifest.get_meta(CROSS_LINGUAL_META, deadline=unrequested_deadline()) or "{}"
        )
        assert recorded["model"] == "packaged:muse-v3" and recorded["dim"] == 512
    finally:
        storage.close()


def test_another_second_model_is_refused_with_the_re_index_message(
    tmp_path: Path, embedder: Embedder, muse_embedder: Embedder
) -> None:
    index_one(tmp_path, embedder, muse_embedder).close()
    retrained = replace(muse_embedder.identity, model="other-muse", weights="0123456789abcdef")
    with pytest.raises(ConfigError) as refused:
        index_one(tmp_path, embedder, OtherModel(muse_embedder, retrained)).close()
    message = str(refused.value)
    assert "packaged:muse-v3" in message and "other-muse" in message
    assert "RAG_CROSS_LINGUAL_MODEL" in message and "fresh data directory" in message


def test_adding_or_dropping_the_second_model_is_refused(
    tmp_path: Path, embedder: Embedder, muse_embedder: Embedder
) -> None:
    index_one(tmp_path / "without", embedder, None).close()
    with pytest.raises(ConfigError, match="re-index"):
        index_one(tmp_path / "without", embedder, muse_embedder).close()
    index_one(tmp_path / "with", embedder, muse_embedder).close()
    with pytest.raises(ConfigError, match="re-index"):
        index_one(tmp_path / "with", embedder, None).close()
