"""Retriever settings (environment variables with the RAG_ prefix)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from services.retriever.page_keys import MIN_KEY_CHARS
from services.retriever.request_proto import MAX_CONTEXT_CHAR_BUDGET
from services.retriever.settings_ranking import RankingSettings
from services.runtime.embedding_settings import EmbeddingSettings
from services.runtime.security.client_settings import client_address, client_settings


class RetrieverSettings(
    RankingSettings,
    EmbeddingSettings,
    client_settings("reranker", "Reranker"),  # type: ignore[misc]
):
    """Every Retriever setting; the ranking ones (fusion, locale turns, the
    rerank blend) are declared in services.retriever.settings_ranking."""

    retriever_port: int = Field(50052, ge=0, le=65535, description="gRPC port of the Retriever")
    retriever_metrics_port: int = Field(
        9466,
        ge=0,
        le=65535,
        description="Prometheus metrics port of the Retriever (0: any free port)",
    )
    reranker_addr: str = Field("localhost:50053", description="host:port; empty disables reranking")
    reranker_recheck_s: float = Field(
        0.5,
        gt=0,
        le=60,
        description="While the Reranker is NOT_SERVING it is not called; its health is "
        "checked again after this long, then twice as long each time it is still down",
    )
    reranker_recheck_max_s: float = Field(
        30.0, gt=0, le=3600, description="The longest wait between two such health checks"
    )
    committed_generation_refresh_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="How often the Retriever re-reads which indexing run is committed (rows of "
        "later runs are never served). A separate Indexer's commit shows up at most this late; "
        "an Indexer in the same process (services.stack) tells it at once",
    )
    # Bounded above: 2**64 entries kept for ever was an unbounded cache (probe).
    query_cache_size: int = Field(
        1024,
        ge=0,
        le=1_000_000,
        description="cached query vectors, reused within the scopes a request searches only "
        "(docs/security.md)",
    )
    query_cache_ttl_s: float = Field(300.0, ge=0, le=86_400, description="seconds one is kept")
    query_max_batch: int = Field(
        32,
        ge=1,
        le=256,
        description="queries that arrive while the model is busy share its next forward pass, "
        "at most this many (1: one pass per query)",
    )
    vector_search_batch: int = Field(
        1,
        ge=1,
        le=256,
        description="vector searches that arrive while the vector store is busy share its "
        "next call (one pass over the segments), at most this many; 1 (default): each request "
        "searches at once, side by side (measured: no gain on 2 cores, services/retriever/"
        "vector_batching.py)",
    )
    max_query_chars: int = Field(1000, ge=16, le=100_000)
    max_raw_query_chars: int = Field(
        100_000,
        ge=1000,
        le=10_000_000,
        description="longest query as sent, before whitespace and invisible characters are "
        "removed (RAG_MAX_QUERY_CHARS bounds what is left); longer: INVALID_ARGUMENT before "
        "any work",
    )
    max_page_url_chars: int = Field(
        2048, ge=64, le=100_000, description="longest page_url of a Retrieve request"
    )
    max_filter_doc_ids: int = Field(
        1000, ge=1, le=100_000, description="most values in a Retrieve filter's doc_ids"
    )
    max_filter_urls: int = Field(
        1000, ge=1, le=100_000, description="most values in a Retrieve filter's urls"
    )
    max_filter_value_chars: int = Field(
        2048,
        ge=64,
        le=100_000,
        description="longest value of a Retrieve filter's doc_ids and urls (a metadata value, "
        "as a document's, holds at most 1,024)",
    )
    max_filter_metadata_entries: int = Field(
        64, ge=1, le=10_000, description="most entries in a Retrieve filter's metadata"
    )
    max_filter_metadata_key_chars: int = Field(
        128, ge=8, le=4096, description="longest key of a Retrieve filter's metadata"
    )
    max_filter_scope_id_chars: int = Field(
        128, ge=8, le=4096, description="longest scope_id of a Retrieve filter"
    )
    max_filter_scope_ids: int = Field(
        64, ge=1, le=1000, description="most scopes one Retrieve searches at once (scope_ids)"
    )
    default_top_k: int = Field(10, ge=1, le=100)
    max_top_k: int = Field(50, ge=1, le=1000)
    candidates_per_channel: int = Field(50, ge=1, le=1000)
    max_candidates_per_channel: int = Field(200, ge=1, le=5000)
    max_chunks_per_document: int = Field(
        2,
        ge=1,
        le=100,
        description="hits of one document in an answer, unless the request says otherwise "
        "(the Indexer's work bound per document is RAG_MAX_CHUNKING_STEPS)",
    )
    context_char_budget: int = Field(6000, ge=200, le=MAX_CONTEXT_CHAR_BUDGET)
    channel_timeout_ms: int = Field(1000, ge=5, le=60_000)
    boost_read_timeout_ms: int = Field(
        500,
        ge=1,
        le=60_000,
        description="the most a request's recency boost waits for the manifest's dates "
        "(within its deadline); past it the boost is skipped and the answer says so",
    )
    diversity_read_timeout_ms: int = Field(
        500,
        ge=1,
        le=60_000,
        description="the most a request's diversity (MMR) step waits for stored vectors "
        "(within its deadline); past it the fused order is kept and the answer says so",
    )
    default_deadline_ms: int = Field(
        5000, ge=50, le=600_000, description="when the caller sets none"
    )
    safety_margin_ms: int = Field(
        50,
        ge=0,
        le=1000,
        description="kept back from the caller's deadline for the rest of the request "
        "when the channels or the rerank call run up to it; the least kept (more is "
        "learnt under load); the channels keep back at most a quarter of the time left",
    )
    health_check_interval_s: float = Field(
        5.0,
        # Also each ping's timeout: below a tenth of a second a store never
        # answers in time (1e-9 held a Retriever NOT_SERVING at 80% of a core).
        ge=0.1,
        le=600,
        description="seconds between pings of the stores; the Retriever is NOT_SERVING "
        "while neither store (nor its schema) answers",
    )
    worker_threads: int = Field(32, ge=2, le=512, description="threads for store and model calls")
    page_token_key: SecretStr | None = Field(
        None,
        description=f"Signs page tokens (HMAC-SHA256; at least {MIN_KEY_CHARS} characters, "
        "e.g. `openssl rand -base64 32`). Every Retriever replica needs the same key. Unset: "
        "a random key per process, with a warning: tokens then stop working at a restart and "
        "on another replica (services/retriever/page_keys.py)",
    )
    page_token_previous_key: SecretStr | None = Field(
        None,
        description="Rotation: the key RAG_PAGE_TOKEN_KEY replaced. Tokens it signed are still "
        "accepted until RAG_PAGE_TOKEN_PREVIOUS_KEY_UNTIL, refused after (FAILED_PRECONDITION: "
        "start again from the first page)",
    )
    page_token_previous_key_until: datetime | None = Field(
        None,
        description="RFC 3339 time with a zone (e.g. 2026-12-01T12:00:00Z) when "
        "RAG_PAGE_TOKEN_PREVIOUS_KEY retires; required with it. A time rather than a duration, "
        "so replicas started at different times agree",
    )

    @model_validator(mode="after")
    def _recheck_bounds(self) -> RetrieverSettings:
        if self.reranker_recheck_s > self.reranker_recheck_max_s:
            raise ValueError(
                "RAG_RERANKER_RECHECK_S must not exceed RAG_RERANKER_RECHECK_MAX_S "
                f"({self.reranker_recheck_s} > {self.reranker_recheck_max_s})"
            )
        return self

    @model_validator(mode="after")
    def _defaults_within_limits(self) -> RetrieverSettings:
        """A default beyond its own limit would refuse every request that
        leaves the field unset, blaming the caller for a value it never sent;
        a margin as long as the default deadline leaves nothing to work in."""
        pairs = (
            ("DEFAULT_TOP_K", self.default_top_k, "MAX_TOP_K", self.max_top_k),
            (
                "CANDIDATES_PER_CHANNEL",
                self.candidates_per_channel,
                "MAX_CANDIDATES_PER_CHANNEL",
                self.max_candidates_per_channel,
            ),
            # The cleaned query is never longer than the raw one (probe).
            (
                "MAX_QUERY_CHARS",
                self.max_query_chars,
                "MAX_RAW_QUERY_CHARS",
                self.max_raw_query_chars,
            ),
        )
        for name, value, limit_name, limit in pairs:
            if value > limit:
                raise ValueError(f"RAG_{name} must not exceed RAG_{limit_name} ({value} > {limit})")
        if self.safety_margin_ms >= self.default_deadline_ms:
            raise ValueError(
                "RAG_SAFETY_MARGIN_MS must be less than RAG_DEFAULT_DEADLINE_MS "
                f"({self.safety_margin_ms} >= {self.default_deadline_ms})"
            )
        return self

    @field_validator("reranker_addr")
    @classmethod
    def _reranker_addr(cls, addr: str) -> str:
        """An address the Reranker's client accepts, or empty (no reranking):
        checked at start-up rather than on the first call."""
        return client_address(addr, "RAG_RERANKER_ADDR") if addr else addr

    @field_validator("page_token_key", "page_token_previous_key")
    @classmethod
    def _page_token_key(cls, key: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if key is None or not key.get_secret_value():
            return None  # an empty variable (a template's placeholder) means "not set"
        if len(key.get_secret_value().strip()) < MIN_KEY_CHARS:  # 40 spaces were a key
            name = f"RAG_{str(info.field_name).upper()}"
            raise ValueError(f"{name}: at least {MIN_KEY_CHARS} characters")
        return key

    @model_validator(mode="after")
    def _page_token_rotation(self) -> RetrieverSettings:
        previous, until = self.page_token_previous_key, self.page_token_previous_key_until
        if previous is not None and self.page_token_key is None:
            raise ValueError("RAG_PAGE_TOKEN_PREVIOUS_KEY needs RAG_PAGE_TOKEN_KEY (the new key)")
        if (previous is None) != (until is None):
            raise ValueError(
                "RAG_PAGE_TOKEN_PREVIOUS_KEY and RAG_PAGE_TOKEN_PREVIOUS_KEY_UNTIL go together"
            )
        if until is not None and until.tzinfo is None:
            raise ValueError("RAG_PAGE_TOKEN_PREVIOUS_KEY_UNTIL needs a zone offset (RFC 3339)")
        if previous is not None and previous == self.page_token_key:
            raise ValueError("RAG_PAGE_TOKEN_PREVIOUS_KEY equals RAG_PAGE_TOKEN_KEY")
        return self
