"""Build the Indexer from settings (shared by `services.indexer` and the embedded stack)."""

from __future__ import annotations

from services.common.embedding import Embedder
from services.common.stores.base import LexicalStore, VectorStore
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.manifest import Manifest
from services.indexer.pipeline import IndexingPipeline
from services.indexer.planning import Planner
from services.indexer.settings import IndexerSettings
from services.indexer.validation import DocumentLimits


def build_indexing_pipeline(
    settings: IndexerSettings,
    embedder: Embedder,
    vectors: VectorStore,
    lexical: LexicalStore,
    manifest: Manifest,
) -> IndexingPipeline:
    params = ChunkingParams(
        target_chars=settings.chunk_target_chars,
        overlap_chars=settings.chunk_overlap_chars,
        max_slack_chars=settings.chunk_max_slack_chars,
    )
    locales = frozenset(x.strip() for x in settings.allowed_locales.split(",") if x.strip())
    limits = DocumentLimits(
        max_doc_id_chars=settings.max_doc_id_chars,
        max_document_chars=settings.max_document_chars,
        allowed_locales=locales,
    )
    planner = Planner(Chunker(params), manifest, limits)
    return IndexingPipeline(
        planner, embedder, vectors, lexical, manifest, write_batch=settings.write_batch
    )
