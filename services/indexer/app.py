"""Build the Indexer from settings (shared by `services.indexer` and the embedded stack)."""

from __future__ import annotations

import json
from dataclasses import asdict

from services.common.embedding import Embedder, EmbeddingIdentity
from services.common.errors import ConfigError
from services.common.logging import get_logger
from services.common.stores.base import LexicalStore, VectorStore
from services.common.stores.manifest import Manifest
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.pipeline import IndexingPipeline
from services.indexer.planning import Planner
from services.indexer.settings import IndexerSettings
from services.indexer.validation import DocumentLimits

log = get_logger(__name__)
EMBEDDING_META = "embedding"


def build_indexing_pipeline(
    settings: IndexerSettings,
    embedder: Embedder,
    vectors: VectorStore,
    lexical: LexicalStore,
    manifest: Manifest,
) -> IndexingPipeline:
    params = chunking_params(settings)
    limits = DocumentLimits.from_settings(settings)
    check_embedding_model(manifest, embedder.identity)
    planner = Planner(Chunker(params), manifest, limits, clean_markdown=settings.clean_markdown)
    return IndexingPipeline(
        planner, embedder, vectors, lexical, manifest, write_batch=settings.write_batch
    )


def chunking_params(settings: IndexerSettings) -> ChunkingParams:
    return ChunkingParams(
        target_chars=settings.chunk_target_chars,
        overlap_chars=settings.chunk_overlap_chars,
        max_slack_chars=settings.chunk_max_slack_chars,
    )


def check_embedding_model(manifest: Manifest, configured: EmbeddingIdentity) -> None:
    """Refuse to add vectors of one model to an index built with another: an
    unchanged document is never re-embedded, so the index would silently mix
    two vector spaces and the vector channel would rank by noise."""
    recorded, documents = manifest.get_meta(EMBEDDING_META), manifest.count()
    if recorded and documents:
        built_with = EmbeddingIdentity(**json.loads(recorded))
        if not built_with.compatible_with(configured):
            raise ConfigError(
                f"this index was embedded with {built_with.describe()}, but "
                f"RAG_EMBEDDING_MODEL gives {configured.describe()}: vectors of different "
                "models are not comparable. Index into a fresh data directory (or vector "
                "collection) with the new model, or configure the old one again"
            )
    elif documents:
        # An index from before models were recorded: its model cannot be known.
        log.warning("embedding_model_adopted", model=configured.model, documents=documents)
    manifest.set_meta(EMBEDDING_META, json.dumps(asdict(configured)))
