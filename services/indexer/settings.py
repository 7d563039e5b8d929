"""Indexer settings (environment variables with the RAG_ prefix)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.core.environment import ENV_PREFIX
from services.core.errors import ConfigError
from services.core.field_rules import language_tag_problem
from services.runtime.embedding_settings import EmbeddingSettings
from services.runtime.security.client_settings import client_settings


class IndexerSettings(EmbeddingSettings):
    indexer_port: int = Field(50051, ge=0, le=65535, description="gRPC port of the Indexer")
    indexer_metrics_port: int = Field(
        9465,
        ge=0,
        le=65535,
        description="Prometheus metrics port of the Indexer (0: any free port)",
    )
    health_check_interval_s: float = Field(
        5.0,
        # Also each ping's timeout: below a tenth of a second a store never
        # answers in time (1e-9 held a Retriever NOT_SERVING at 80% of a core).
        ge=0.1,
        le=600,
        description="seconds between pings of the stores; the Indexer is NOT_SERVING "
        "while either store (or its schema) does not answer",
    )
    embedding_batch_size: int = Field(64, ge=1, le=1024)
    index_work_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="nice value of the Indexer's run threads and of its document encoder's "
        "compute threads (Linux; 0: as the process). Queries then get most of a shared core "
        "while an ingest runs, and an ingest alone still has the whole machine "
        "(services.core.thread_priority; bench.load.ingest_isolation); logged at start "
        "(index_work_priority)",
    )
    chunk_target_chars: int = Field(800, ge=100, le=20000)
    chunk_overlap_chars: int = Field(
        200, ge=0, le=10000, description="under half of RAG_CHUNK_TARGET_CHARS"
    )
    chunk_max_slack_chars: int = Field(200, ge=0, le=10000)
    max_document_chars: int = Field(2_000_000, ge=1000, le=1_000_000_000)
    max_chunking_steps: int = Field(
        10_000,
        ge=1,
        le=10_000_000,
        description="chunking steps (about one per chunk) one document may take; more: that "
        "document is REJECTED with its name and the rest of the batch goes on (named "
        "RAG_MAX_CHUNKS_PER_DOCUMENT before 2026-12-06, which is the Retriever's hits per "
        "document: one stack process read both)",
    )
    max_doc_id_chars: int = Field(512, ge=8, le=4096)
    allowed_locales: str = Field("", description="comma-separated; empty = any language tag")
    max_title_chars: int = Field(
        1000, ge=16, le=100_000, description="longest document title; longer: REJECTED"
    )
    max_url_chars: int = Field(
        2048, ge=64, le=100_000, description="longest document url; longer: REJECTED"
    )
    max_metadata_key_chars: int = Field(
        128, ge=8, le=4096, description="longest metadata key of a document; longer: REJECTED"
    )
    max_scope_id_chars: int = Field(
        128,
        ge=8,
        le=4096,
        description="longest scope_id (letters, digits and . _ - : /; required on every "
        "document); longer: REJECTED",
    )
    max_batch_documents: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="documents in one Upsert, UpsertStream or Sync request "
        "(more: INVALID_ARGUMENT; the CLI sends 64 by default)",
    )
    max_delete_ids: int = Field(
        10_000, ge=1, le=1_000_000, description="doc_ids in one Delete request"
    )
    max_sync_keep: int = Field(
        1_000_000,
        ge=1,
        le=100_000_000,
        description="document keys in one Sync request's keep list (every document of the "
        "scope sent in earlier batches of the same sync)",
    )
    write_batch: int = Field(256, ge=1, le=10000, description="chunks per store write")
    vector_settle_after_s: float = Field(
        5.0,
        ge=0,
        le=3600,
        description="seconds without a run after which the vector index is brought up to date. "
        "Runs that follow one another (a bulk load) let the embedded store defer its HNSW "
        "build until the new points are a quarter of the indexed ones, instead of rebuilding "
        "the whole index every few thousand chunks; this many idle seconds later the rest is "
        "built. 0: build after every run, as before",
    )
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

    @field_validator("allowed_locales")
    @classmethod
    def _locales_are_tags(cls, value: str) -> str:
        # `*` or `english` started the Indexer, which then refused every
        # document as "not one of the allowed locales" (probe).
        for tag in (part.strip() for part in value.split(",")):
            if tag and (problem := language_tag_problem(tag)):
                raise ValueError(
                    f"{problem}; list language tags separated by commas (en, zh-CN), "
                    "or leave it empty for any"
                )
        return value

    @model_validator(mode="after")
    def _overlap_under_half_the_target(self) -> IndexerSettings:
        # Checked by the chunker too, but only once the model had loaded,
        # in its own words (`overlap_chars`), not the variables'.
        if self.chunk_overlap_chars * 2 >= self.chunk_target_chars:
            raise ConfigError(
                f"RAG_CHUNK_OVERLAP_CHARS={self.chunk_overlap_chars} must be under half of "
                f"RAG_CHUNK_TARGET_CHARS={self.chunk_target_chars} (at most "
                f"{(self.chunk_target_chars - 1) // 2})"
            )
        return self


class CliSettings(
    BaseSettings,
    client_settings("indexer", "Indexer"),  # type: ignore[misc]
    client_settings("retriever", "Retriever"),  # type: ignore[misc]
):
    """How the command line reaches the Indexer and the Retriever (TLS, token):
    RAG_INDEXER_TOKEN_FILE, RAG_INDEXER_TLS_CA_FILE, RAG_RETRIEVER_TOKEN_FILE, ..."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    indexer_addr: str = Field(
        "localhost:50051", description="host:port of the Indexer (--addr overrides it)"
    )
    retriever_addr: str = Field(
        "localhost:50052",
        description="host:port of the Retriever, for release-check (--retriever-addr overrides it)",
    )
