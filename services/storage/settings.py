"""Which stores a process opens, chosen by environment variables alone.

Embedded mode (default) keeps Qdrant Edge + tantivy + SQLite under
`RAG_DATA_DIR`. Server mode talks to a Qdrant server and an OpenSearch cluster;
it is selected by setting both `QDRANT_URL` and `OPENSEARCH_URL`. PostgreSQL mode
keeps vectors (pgvector), the lexical index and the manifest in one database,
selected by `POSTGRES_URL` (stores in `postgres_*.py`). Settings that
contradict each other stop the process at start-up with a `ConfigError` naming
the variables, instead of silently running half in one mode and half in the
other (e.g. vectors on a cluster, BM25 in a container's local folder).

The store variables keep the names operators know from the servers' own docs
(no `RAG_` prefix); `validation_alias` makes `load_settings` name them in errors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.core.analysis import CjkMode
from services.core.environment import ENV_PREFIX, default_data_dir
from services.core.errors import ConfigError
from services.storage.base import (
    DEFAULT_EF_GROWTH,
    DEFAULT_SEARCH_EF,
    DEFAULT_VECTOR_QUANTIZATION,
    SearchEf,
    VectorQuantization,
)
from services.storage.lexical_fields import FIELD_BOOSTS
from services.storage.store_urls import check_http_url, check_postgres_url


class StoreMode(StrEnum):
    AUTO = "auto"
    EMBEDDED = "embedded"
    SERVER = "server"
    POSTGRES = "postgres"


class RefreshPolicy(StrEnum):
    """OpenSearch `refresh` parameter on writes (see deploy/README.md)."""

    WAIT_FOR = "wait_for"  # the call returns once the write is searchable
    FALSE = "false"  # fastest bulk loads; searchable after refresh_interval
    TRUE = "true"  # forces a refresh per request: tests only


class StoreSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    data_dir: Path = Field(
        default_factory=default_data_dir, description="Embedded mode: folder of all local data"
    )
    store_mode: StoreMode = Field(
        StoreMode.AUTO,
        description="auto | embedded | server | postgres (auto: decided by the URLs)",
    )

    postgres_url: SecretStr | None = Field(
        None,
        validation_alias="POSTGRES_URL",
        description="PostgreSQL with pgvector, e.g. postgresql://rag:secret@postgres:5432/rag",
    )
    postgres_schema: str = Field(
        "rag",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        validation_alias="POSTGRES_SCHEMA",
        description="schema holding the tables (one index per schema)",
    )
    postgres_pool_size: int = Field(8, ge=1, le=256, validation_alias="POSTGRES_POOL_SIZE")
    postgres_timeout_s: float = Field(
        5.0,
        gt=0,
        le=300,
        validation_alias="POSTGRES_TIMEOUT_S",
        description=(
            "connect timeout and statement_timeout of every connection; a call with a "
            "deadline (a Retrieve's reads, a run's writes) takes the shorter of it and the "
            "time left"
        ),
    )

    qdrant_url: str | None = Field(
        None, validation_alias="QDRANT_URL", description="Qdrant server, e.g. http://qdrant:6333"
    )
    qdrant_api_key: SecretStr | None = Field(None, validation_alias="QDRANT_API_KEY")
    qdrant_collection: str = Field("rag_chunks", min_length=1, validation_alias="QDRANT_COLLECTION")
    qdrant_prefer_grpc: bool = Field(
        True, validation_alias="QDRANT_PREFER_GRPC", description="gRPC on port 6334 (else REST)"
    )
    qdrant_grpc_port: int = Field(6334, ge=1, le=65535, validation_alias="QDRANT_GRPC_PORT")
    qdrant_shards: int = Field(
        1, ge=1, le=1024, validation_alias="QDRANT_SHARDS", description="when creating"
    )
    qdrant_replication_factor: int = Field(
        1, ge=1, le=16, validation_alias="QDRANT_REPLICATION_FACTOR", description="when creating"
    )
    qdrant_timeout_s: float = Field(
        5.0,
        gt=0,
        le=300,
        validation_alias="QDRANT_TIMEOUT_S",
        description=(
            "per call; a call with a deadline (a Retrieve's reads, a run's writes) takes the "
            "shorter of it and the time left"
        ),
    )

    opensearch_url: str | None = Field(
        None, validation_alias="OPENSEARCH_URL", description="e.g. https://opensearch:9200"
    )
    opensearch_index: str = Field("rag-chunks", min_length=1, validation_alias="OPENSEARCH_INDEX")
    opensearch_manifest_index: str = Field(
        "rag-manifest", min_length=1, validation_alias="OPENSEARCH_MANIFEST_INDEX"
    )
    opensearch_user: str | None = Field(None, validation_alias="OPENSEARCH_USER")
    opensearch_password: SecretStr | None = Field(None, validation_alias="OPENSEARCH_PASSWORD")
    opensearch_verify_certs: bool = Field(True, validation_alias="OPENSEARCH_VERIFY_CERTS")
    opensearch_timeout_s: float = Field(
        5.0,
        gt=0,
        le=300,
        validation_alias="OPENSEARCH_TIMEOUT_S",
        description="per request; a call with a deadline takes the shorter of it and the time left",
    )
    opensearch_shards: int = Field(
        1, ge=1, le=1024, validation_alias="OPENSEARCH_SHARDS", description="when creating"
    )
    opensearch_replicas: int = Field(
        1, ge=0, le=16, validation_alias="OPENSEARCH_REPLICAS", description="when creating"
    )
    opensearch_refresh: RefreshPolicy = Field(
        RefreshPolicy.WAIT_FOR, validation_alias="OPENSEARCH_REFRESH"
    )

    vector_optimize_apart: bool = Field(
        True,
        description="Embedded mode: build the vector index (HNSW) on a copy of the shard in a "
        "child process and swap it in, so queries never wait for it (the engine holds the "
        "Python GIL while it builds); false builds in the service's own process. Needs free "
        "disk for one copy of the vector shard while it runs; the copy is made only when the "
        "shard's counts say a build can be due (docs/indexing.md)",
    )
    vector_search_ef: int = Field(
        DEFAULT_SEARCH_EF,
        ge=16,
        le=4096,
        description="HNSW candidates per vector search (Qdrant Edge and server, pgvector) "
        "in an index of up to 100,000 chunks, at least 2 x the limit (higher: closer to exact "
        "search, slower); larger embedded and PostgreSQL indexes ask for more "
        "(RAG_VECTOR_SEARCH_EF_GROWTH)",
    )
    vector_search_ef_growth: float = Field(
        DEFAULT_EF_GROWTH,
        ge=0,
        le=1,
        description="How RAG_VECTOR_SEARCH_EF grows with an index above 100,000 chunks: "
        "x (chunks / 100,000) ** growth, at most 4096 (0: fixed). HNSW's recall at a fixed ef "
        "falls as the graph grows (docs/retrieval.md)",
    )
    vector_quantization: VectorQuantization = Field(
        DEFAULT_VECTOR_QUANTIZATION,
        description="int8 | none: how Qdrant (Edge and server) keeps the vectors its HNSW graph "
        "walks. int8: an int8 copy in memory, the float32 originals in mapped files, every "
        "search rescored by the originals (at 200,000 chunks: search 1.8x faster at equal "
        "recall, HNSW build 2x faster, less resident memory; docs/retrieval.md). Applies to "
        "the segments built from then on; an existing index keeps working. pgvector has no "
        "such index: PostgreSQL mode ignores it",
    )
    # Fitted on the documentation sets' train splits (services.storage.lexical_fields).
    lexical_title_boost: float = Field(
        FIELD_BOOSTS["title"],
        gt=0,
        le=100,
        description="BM25 weight of a chunk's title (query time)",
    )
    lexical_heading_boost: float = Field(
        FIELD_BOOSTS["heading_path"],
        gt=0,
        le=100,
        description="BM25 weight of a chunk's heading path (query time)",
    )
    lexical_text_boost: float = Field(
        1.0, gt=0, le=100, description="BM25 weight of a chunk's text (query time)"
    )

    lexical_cjk: CjkMode = Field(
        CjkMode.WORDS,
        description="Chinese text in the lexical index: words (jieba search-mode segmentation) "
        "| bigrams (overlapping character pairs). Japanese and Korean are always bigrams. "
        "Recorded in the index; changing it needs a re-index",
    )

    @property
    def vector_search(self) -> SearchEf:
        return SearchEf(self.vector_search_ef, self.vector_search_ef_growth)

    @property
    def lexical_field_boosts(self) -> dict[str, float]:
        return {
            "title": self.lexical_title_boost,
            "heading_path": self.lexical_heading_boost,
            "text": self.lexical_text_boost,
        }

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir_named(cls, value: object) -> object:
        # An empty RAG_DATA_DIR became "." and the stores were written into
        # whatever folder the process started in (probe).
        if isinstance(value, str) and not value.strip():
            raise ValueError("RAG_DATA_DIR is blank: name the folder of the embedded stores")
        # `~/rag` from a shell that did not expand it made a folder named `~`.
        return Path(value).expanduser() if isinstance(value, str) else value

    @field_validator(
        "qdrant_url", "opensearch_url", "opensearch_user", "postgres_url", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # `FOO=` in a compose file or k8s manifest means "not set", not "empty host".
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("qdrant_url", "opensearch_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # `QDRANT_URL=qdrant` was read as host `qdrant` and failed after the
        # model loaded, as a traceback (probe): the form is checked here.
        if value is not None:
            check_http_url(value)
        return value

    @field_validator("postgres_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_postgres_url(value.get_secret_value())
        return value

    @model_validator(mode="after")
    def _check_mode(self) -> StoreSettings:
        _refuse_prefixed_store_urls(os.environ)
        self.resolved_mode()  # raises ConfigError on contradictions
        return self

    def resolved_mode(self) -> StoreMode:
        """EMBEDDED, SERVER or POSTGRES; ConfigError (naming the variables) when
        contradictory."""
        if self.postgres_url is not None or self.store_mode is StoreMode.POSTGRES:
            return self._postgres_mode()
        qdrant, opensearch = self.qdrant_url is not None, self.opensearch_url is not None
        if self.store_mode is StoreMode.EMBEDDED and (qdrant or opensearch):
            raise ConfigError(
                "RAG_STORE_MODE=embedded contradicts QDRANT_URL/OPENSEARCH_URL being set: "
                "unset the URLs or use RAG_STORE_MODE=server"
            )
        if self.store_mode is StoreMode.SERVER and not (qdrant and opensearch):
            raise ConfigError(
                "RAG_STORE_MODE=server needs both QDRANT_URL and OPENSEARCH_URL "
                f"(QDRANT_URL {_state(qdrant)}, OPENSEARCH_URL {_state(opensearch)})"
            )
        if qdrant != opensearch:
            raise ConfigError(
                "QDRANT_URL and OPENSEARCH_URL must be set together (server mode) or both "
                f"left unset (embedded mode); QDRANT_URL is {_state(qdrant)}, "
                f"OPENSEARCH_URL is {_state(opensearch)}"
            )
        return StoreMode.SERVER if qdrant else StoreMode.EMBEDDED

    def _postgres_mode(self) -> StoreMode:
        """PostgreSQL mode: POSTGRES_URL alone, never mixed with the other stores."""
        if self.postgres_url is None:
            raise ConfigError("RAG_STORE_MODE=postgres needs POSTGRES_URL (it is unset)")
        if self.store_mode not in (StoreMode.AUTO, StoreMode.POSTGRES):
            raise ConfigError(
                f"RAG_STORE_MODE={self.store_mode.value} contradicts POSTGRES_URL being set: "
                "unset POSTGRES_URL or use RAG_STORE_MODE=postgres"
            )
        others = [
            name
            for name, value in (
                ("QDRANT_URL", self.qdrant_url),
                ("OPENSEARCH_URL", self.opensearch_url),
            )
            if value is not None
        ]
        if others:
            raise ConfigError(
                f"POSTGRES_URL contradicts {' and '.join(others)} being set: PostgreSQL mode "
                "keeps vectors, text and manifest in one database; unset one side"
            )
        return StoreMode.POSTGRES

    @property
    def is_server(self) -> bool:
        return self.resolved_mode() is StoreMode.SERVER

    @property
    def is_postgres(self) -> bool:
        return self.resolved_mode() is StoreMode.POSTGRES


def _state(is_set: bool) -> str:
    return "set" if is_set else "unset"


STORE_URLS = ("POSTGRES_URL", "QDRANT_URL", "OPENSEARCH_URL")


def _refuse_prefixed_store_urls(environ: Mapping[str, str]) -> None:
    """ConfigError for RAG_POSTGRES_URL and the like: the store URLs are read
    without the prefix every other setting has, so the prefixed name was
    ignored and the service ran on an empty embedded store (probe)."""
    for name in STORE_URLS:
        prefixed = ENV_PREFIX + name
        if environ.get(prefixed, "").strip():
            raise ConfigError(
                f"{prefixed} is not read: the store's URL is {name}, without the "
                f"{ENV_PREFIX} prefix (set {name} instead)"
            )
