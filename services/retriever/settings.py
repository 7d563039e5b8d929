"""Retriever settings (environment variables with the RAG_ prefix)."""

from __future__ import annotations

from pydantic import Field, model_validator

from services.retriever.exact import ExactPrecedence
from services.retriever.locale_balance import CrossLanguageLexical, LocaleBalance
from services.retriever.score_fusion import FusionMethod
from services.runtime.embedding_settings import EmbeddingSettings
from services.runtime.security.client_settings import client_settings


class RetrieverSettings(
    EmbeddingSettings,
    client_settings("reranker", "Reranker"),  # type: ignore[misc]
):
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
    query_cache_size: int = Field(1024, ge=0)
    query_cache_ttl_s: float = Field(300.0, ge=0)
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
        description="longest value of a Retrieve filter's doc_ids, urls and metadata",
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
    rrf_k: int = Field(60, ge=1, le=1000)
    fusion: FusionMethod = Field(
        FusionMethod.RRF,
        description="rrf | min_max | dbsf: how the channels' lists are combined when a request "
        "does not say (docs/retrieval.md, 'Fusion'; chosen by measurement, docs/benchmarks.md)",
    )
    exact_precedence: ExactPrecedence = Field(
        ExactPrecedence.LEAD,
        description="For a query with exact identifiers (429, text-embedding-v4, chunkSize=800): "
        "lead = the best hit holding the most of them moves to rank 1, the rest keeps its order; "
        "tiers = every hit holding more of them comes before any holding fewer; off = RRF or "
        "rerank order only (docs/retrieval.md, 'Exact identifiers')",
    )
    unread_language_vector_weight: float = Field(
        0.0,
        ge=0,
        le=1,
        description="RRF weight of the vector channel for a query or scope locale in a language "
        "the embedding model does not read (RAG_EMBEDDING_LANGUAGES); 0 leaves the channel out",
    )
    vector_locale_balance: LocaleBalance = Field(
        LocaleBalance.INTERLEAVE,
        description="interleave | off. interleave: with a model that reads every language "
        "(RAG_EMBEDDING_LANGUAGES=*), an index of several locales and a request that fixes "
        "none, the vector channel ranks each locale's pages apart and takes them in turns, so "
        "a question is not pulled to pages of its own language (docs/retrieval.md)",
    )
    cross_language_lexical: CrossLanguageLexical = Field(
        CrossLanguageLexical.DICTIONARY,
        description="dictionary | off. With locales ranked apart (RAG_VECTOR_LOCALE_BALANCE="
        "interleave), the lexical channel also searches each other-language locale with the "
        "question's words translated by the CC-CEDICT Chinese-English dictionary; off: only "
        "exact identifiers match across languages (docs/retrieval.md)",
    )
    max_chunks_per_document: int = Field(2, ge=1, le=100)
    context_char_budget: int = Field(6000, ge=200, le=200_000)
    rerank_candidates: int = Field(20, ge=1, le=200)
    rerank_budget_ms: int = Field(300, ge=10, le=60_000)
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
    safety_margin_ms: int = Field(10, ge=0, le=1000)
    health_check_interval_s: float = Field(5.0, gt=0, le=600)
    worker_threads: int = Field(32, ge=2, le=512, description="threads for store and model calls")

    @model_validator(mode="after")
    def _recheck_bounds(self) -> RetrieverSettings:
        if self.reranker_recheck_s > self.reranker_recheck_max_s:
            raise ValueError(
                "RAG_RERANKER_RECHECK_S must not exceed RAG_RERANKER_RECHECK_MAX_S "
                f"({self.reranker_recheck_s} > {self.reranker_recheck_max_s})"
            )
        return self
