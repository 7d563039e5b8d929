"""Indexer settings (environment variables with the RAG_ prefix)."""

from __future__ import annotations

from pydantic import Field

from services.common.embedding_settings import EmbeddingSettings


class IndexerSettings(EmbeddingSettings):
    indexer_port: int = Field(50051, ge=0, le=65535, description="gRPC port of the Indexer")
    embedding_batch_size: int = Field(64, ge=1, le=1024)
    chunk_target_chars: int = Field(800, ge=100, le=20000)
    chunk_overlap_chars: int = Field(200, ge=0, le=10000)
    chunk_max_slack_chars: int = Field(200, ge=0, le=10000)
    max_document_chars: int = Field(2_000_000, ge=1000)
    max_doc_id_chars: int = Field(512, ge=8, le=4096)
    allowed_locales: str = Field("", description="comma-separated; empty = any language tag")
    write_batch: int = Field(256, ge=1, le=10000, description="chunks per store write")
    clean_markdown: bool = Field(
        True,
        description=(
            "reduce Markdown bodies to what a reader sees before chunking: HTML comments, "
            "link-reference definitions, HTML tags, badge lines and YAML front matter removed, "
            "links and images reduced to their text, code left as written. A switch so that "
            "an evaluation can measure the cleaning's effect (index with it off and on); "
            "changing it re-chunks the Markdown documents it affects on their next ingest"
        ),
    )
