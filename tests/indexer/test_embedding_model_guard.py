"""An index remembers the embedding model that made its vectors: the Indexer
refuses to start on it with a different model (unchanged documents are never
re-embedded, so the index would mix two vector spaces), names both models,
and changes nothing. Real model, real embedded stores."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from services.core.errors import ConfigError, StoreError
from services.core.models import ContentType, Document
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder, EmbeddingIdentity
from services.indexer.app import build_indexing_pipeline
from services.indexer.settings import IndexerSettings
from services.runtime.model_record import check_served_models
from services.storage.base import unrequested_deadline
from services.storage.factory import open_manifest, open_stores
from services.storage.manifest import EMBEDDING_META
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage

pytestmark = pytest.mark.integration


class OtherModel:
    """The real embedder presented under another identity (test double for a
    second model: the guard only reads the identity)."""

    def __init__(self, inner: Embedder, identity: EmbeddingIdentity) -> None:
        self.inner, self.identity = inner, identity
        self.model_name, self.dim = identity.model, identity.dim
        self.document_encoder = inner.document_encoder

    def embed_documents(self, texts: list[str], between: object = None) -> object:
        return self.inner.embed_documents(texts, between)


def open_index(data_dir: Path, embedder: object) -> tuple[object, list[object]]:
    stores = StoreSettings(data_dir=data_dir, store_mode=StoreMode.EMBEDDED)
    vectors, lexical = open_stores(stores, 384)
    manifest = open_manifest(stores)
    handles = [vectors, lexical, manifest]
    try:
        pipeline = build_indexing_pipeline(
            IndexerSettings(), embedder, Storage(vectors, lexical, manifest)
        )  # type: ignore[arg-type]
    except Exception:
        close(handles)
        raise
    return pipeline, handles


def close(handles: list[object]) -> None:
    for handle in handles:
        handle.close()  # type: ignore[attr-defined]


def recorded_model(data_dir: Path) -> dict[str, object]:
    manifest = open_manifest(StoreSettings(data_dir=data_dir, store_mode=StoreMode.EMBEDDED))
    try:
        return json.loads(
            manifest.get_meta(EMBEDDING_META, deadline=unrequested_deadline()) or "{}"
        )  # type: ignore[no-any-return]
    finally:
        manifest.close()


def index_one(data_dir: Path, embedder: object) -> None:
    pipeline, handles = open_index(data_dir, embedder)
    try:
        doc = Document(
            doc_id="a",
            text="Tide tables for the northern harbour.",
            url="https://x.test/a",
            title="Tides",
            scope_id="site",
            content_type=ContentType.MARKDOWN,
        )
        pipeline.upsert([doc])  # type: ignore[attr-defined]
    finally:
        close(handles)


def test_the_same_model_loaded_twice_has_the_same_identity(embedder: Embedder) -> None:
    again = Embedder(EmbedderConfig(backend="torch"))
    assert again.identity == embedder.identity
    assert embedder.identity.dim == 384 and len(embedder.identity.weights) == 16


def test_a_retrained_model_at_the_same_path_is_another_model(
    tmp_path: Path, embedder: Embedder
) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    from services.embedding.embedder import resolve_model_path

    model = SentenceTransformer(resolve_model_path(""), device="cpu")
    with torch.no_grad():
        next(iter(model.parameters())).add_(0.01)
    model.save(str(tmp_path / "model"))
    changed = Embedder(EmbedderConfig(model=str(tmp_path / "model"), backend="torch"))
    assert changed.identity.dim == embedder.identity.dim
    assert not changed.identity.compatible_with(embedder.identity)


def test_index_built_with_another_model_refuses_to_start(
    tmp_path: Path, embedder: Embedder
) -> None:
    index_one(tmp_path, embedder)
    before = recorded_model(tmp_path)
    assert before["weights"] == embedder.identity.weights
    other = replace(embedder.identity, model="/models/tuned", weights="0123456789abcdef")
    with pytest.raises(ConfigError) as refused:
        open_index(tmp_path, OtherModel(embedder, other))
    message = str(refused.value)
    assert embedder.identity.weights in message and "'/models/tuned'" in message
    assert "fresh data directory" in message
    assert recorded_model(tmp_path) == before  # nothing changed


def test_same_weights_under_another_name_is_the_same_model(
    tmp_path: Path, embedder: Embedder
) -> None:
    index_one(tmp_path, embedder)
    moved = replace(embedder.identity, model="/opt/models/minilm")
    index_one(tmp_path, OtherModel(embedder, moved))
    assert recorded_model(tmp_path)["model"] == "/opt/models/minilm"


def test_an_empty_index_takes_any_model(tmp_path: Path, embedder: Embedder) -> None:
    _, handles = open_index(tmp_path, embedder)  # records the packaged model
    close(handles)
    other = replace(embedder.identity, model="/models/tuned", weights="0123456789abcdef")
    index_one(tmp_path, OtherModel(embedder, other))
    assert recorded_model(tmp_path)["weights"] == "0123456789abcdef"


def test_index_built_with_other_prompts_refuses_to_start(
    tmp_path: Path, embedder: Embedder
) -> None:
    index_one(tmp_path, embedder)
    before = recorded_model(tmp_path)
    assert before["query_prompt"] == "" and before["passage_prompt"] == ""
    prompted = replace(embedder.identity, query_prompt="query: ", passage_prompt="passage: ")
    with pytest.raises(ConfigError) as refused:
        open_index(tmp_path, OtherModel(embedder, prompted))
    message = str(refused.value)
    assert "query prompt 'query: '" in message and "RAG_EMBEDDING_PROMPTS" in message
    assert "fresh data directory" in message
    assert recorded_model(tmp_path) == before


def test_an_index_recorded_before_prompts_existed_reads_as_prompt_less(
    tmp_path: Path, embedder: Embedder
) -> None:
    index_one(tmp_path, embedder)
    old_record = {k: v for k, v in recorded_model(tmp_path).items() if "prompt" not in k}
    manifest = open_manifest(StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED))
    manifest.set_meta(EMBEDDING_META, json.dumps(old_record), deadline=unrequested_deadline())
    manifest.close()
    index_one(tmp_path, embedder)  # accepted: the packaged model has no prompts
    assert recorded_model(tmp_path)["query_prompt"] == ""


def test_a_retriever_refuses_an_index_whose_vectors_another_model_made(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Probe: a Retriever started alone with RAG_EMBEDDING_MODEL set to
    another 384-dimensional model served the index, its vector channel ranking
    by noise; the check was the Indexer's only."""
    index_one(tmp_path, embedder)
    manifest = open_manifest(StoreSettings(data_dir=tmp_path, store_mode=StoreMode.EMBEDDED))
    try:
        check_served_models(manifest, embedder.identity, None)  # the same model serves
        other = replace(embedder.identity, model="/models/tuned", weights="0123456789abcdef")
        with pytest.raises(ConfigError, match=r"^the Retriever cannot serve this index: ") as bad:
            check_served_models(manifest, other, None)
        assert "'/models/tuned'" in str(bad.value) and embedder.identity.weights in str(bad.value)
        with pytest.raises(ConfigError, match="as its cross-lingual model"):
            check_served_models(manifest, embedder.identity, other)  # no second vectors here
    finally:
        manifest.close()


def test_a_retriever_serves_an_index_it_cannot_read_yet_unchecked(embedder: Embedder) -> None:
    class Unreachable:
        """A labelled fake, to inject the fault: a store still starting."""

        def get_meta(self, key: str, deadline: object) -> str:
            raise StoreError("connection refused")

        def count(self, deadline: object) -> int:
            raise StoreError("connection refused")

    check_served_models(Unreachable(), embedder.identity, None)  # type: ignore[arg-type]
