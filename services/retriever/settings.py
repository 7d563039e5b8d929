"""Retriever settings (environment variables with the RAG_ prefix)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from services.embedding.packaged_files import MODELS as PACKAGED_RERANKERS
from services.embedding.packaged_models import (
    DEFAULT_RERANKER,
    model_name,
    reranker_languages,
)
from services.embedding.packaged_models import PREFIX as PACKAGED_PREFIX
from services.retriever.exact import ExactPrecedence
from services.retriever.fusion import FITTED_RERANK, FITTED_RERANK_BLEND, FITTED_SECOND_WEIGHT
from services.retriever.locale_balance import CrossLanguageLexical, LocaleBalance
from services.retriever.locale_order import (
    DEFAULT_CROSS_LINGUAL_MARGIN,
    DEFAULT_MARGIN,
    DEFAULT_WAIT_GAP,
    LocaleOrder,
)
from services.retriever.page_keys import MIN_KEY_CHARS
from services.retriever.request_proto import MAX_CONTEXT_CHAR_BUDGET
from services.retriever.score_fusion import FusionMethod
from services.retriever.translation_deferral import THRESHOLD as DEFERRAL_THRESHOLD
from services.runtime.embedding_settings import EmbeddingSettings
from services.runtime.security.client_settings import client_address, client_settings


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
    # Fitted on the train splits of SciFact, the bilingual set and the
    # third-party questions together (bench/eval/channel_weight_fit.py): all
    # three are whole questions, so the fitted 3 is the question weight below;
    # other queries keep 1 (bench/eval/known_item.py). A request's `weights`
    # override either.
    vector_weight: float = Field(
        1.0,
        gt=0,
        le=10,
        description="RRF (or score-fusion) weight of the vector channel when a request sets "
        "none and the query does not read as a question (a few remembered words, an "
        "identifier): a heavier one buries a page only the lexical channel finds "
        "(docs/retrieval.md, 'Channel weights')",
    )
    # Fitted like vector_weight, but only for queries that read as a question
    # (services/core/analysis/query_shape.py): the weight that loses a few
    # remembered words is kept for questions, where it was fitted.
    question_vector_weight: float = Field(
        3.0,
        gt=0,
        le=10,
        description="RRF (or score-fusion) weight of the vector channel for a query that reads "
        "as a question (RAG_QUESTION_MIN_WORDS words or more, one of them a function word) when "
        "the request sets no vector weight; other queries keep RAG_VECTOR_WEIGHT "
        "(docs/retrieval.md, 'Channel weights')",
    )
    question_min_words: int = Field(
        4,
        ge=1,
        le=100,
        description="words a query needs (with a function word among them) to get "
        "RAG_QUESTION_VECTOR_WEIGHT; a Han character pair counts as one word",
    )
    lexical_weight: float = Field(
        1.0,
        gt=0,
        le=10,
        description="RRF (or score-fusion) weight of the lexical channel when a request sets "
        "none (fitted on training questions: docs/retrieval.md, 'Fusion')",
    )
    cross_lingual_weight: float = Field(
        1.0,
        ge=0,
        le=10,
        description="RRF weight of the cross-lingual channel (the chunks' second vector, "
        "RAG_CROSS_LINGUAL_MODEL) when a request sets none; 0 leaves its list out of the fusion. "
        "Unset: the second model's fitted weight (services.retriever.fusion.FITTED_SECOND_WEIGHT: "
        "1 for packaged:muse-v3, 4 for packaged:bge-small-en)",
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
    locale_order: LocaleOrder = Field(
        LocaleOrder.EVIDENCE,
        description="evidence | question_first. With locales ranked apart, which locale's list "
        "leads the turns: evidence = another language's locale leads when its first hit's "
        "cosine (+ lexical agreement) beats the question's language's by more than "
        "RAG_LOCALE_ORDER_MARGIN; question_first = the question's language always leads "
        "(services/retriever/locale_order.py)",
    )
    locale_order_margin: float = Field(
        DEFAULT_MARGIN,
        ge=-1,
        le=2,
        description="how much more evidence another language's locale needs to lead "
        "(cosine scale; fitted on the bilingual train split: bench/eval/locale_order_fit.py)",
    )
    locale_order_cross_lingual_margin: float = Field(
        DEFAULT_CROSS_LINGUAL_MARGIN,
        ge=-1,
        le=2,
        description="with a cross-lingual second vector (RAG_CROSS_LINGUAL_MODEL), how much "
        "higher another language's locale's best cosine in that channel must be for it to "
        "lead (fitted on the bilingual train split: bench/eval/locale_order_fit.py "
        "--cross-lingual)",
    )
    locale_wait_gap: float = Field(
        DEFAULT_WAIT_GAP,
        ge=0,
        le=2,
        description="with a cross-lingual second vector, a locale whose best cosine in that "
        "channel is more than this below the leading locale's takes no turns: its list "
        "follows the others' (an unrelated minority language no longer takes rank 2); "
        "2 turns it off (chosen on the train splits: bench/eval/locale_wait_fit.py)",
    )
    translation_deferral_share: float = Field(
        DEFERRAL_THRESHOLD,
        ge=0,
        le=2,
        description="with a cross-lingual second vector, a scope whose recent bilingual "
        "questions had every translation's locales sure to wait (RAG_LOCALE_WAIT_GAP) in more "
        "than this share embeds the translated question only once that channel says it is "
        "needed, instead of in the question's pass (measured break-even ~0.35: "
        "services/retriever/translation_deferral.py); 0: always, 2: never",
    )
    max_chunks_per_document: int = Field(
        2,
        ge=1,
        le=100,
        description="hits of one document in an answer, unless the request says otherwise "
        "(the Indexer's work bound per document is RAG_MAX_CHUNKING_STEPS)",
    )
    context_char_budget: int = Field(6000, ge=200, le=MAX_CONTEXT_CHAR_BUDGET)
    # The same variable the Reranker reads, so one setting keeps both in step: the
    # rerank_* values below default to the rule fitted for this model
    # (services.retriever.fusion.FITTED_RERANK) and to the languages it reads.
    rerank_model: str = Field(
        DEFAULT_RERANKER,
        min_length=1,
        description="the model the Reranker serves (RAG_RERANK_MODEL, read by both services): "
        "a packaged model's fitted candidates, blend and gate, and its languages, are the "
        "defaults of the RAG_RERANK_* settings below; any other model gets the cross-encoder's",
    )
    # 4 for the cross-encoder: fitted with the rerank blend on three train splits
    # (services.retriever.fusion, FITTED_RERANK; 20 before the cross-lingual channel joined
    # bilingual scopes' fused lists). The packaged L-12 costs ~8 ms a pair on an idle 2-core
    # machine and 40-140 ms on a busy one; the sizing (rerank_sizing) sends fewer when fewer
    # fit the budget, and the answer then says partial.
    rerank_candidates: int = Field(
        4,
        ge=1,
        le=200,
        description="how many of the fused candidates the Reranker is asked to score "
        "(the rest keep their fused places); fitted with the rerank blend on three train "
        "splits (docs/benchmarks.md). Never more than the Reranker's own "
        "RAG_RERANK_MAX_PASSAGES, which the Retriever asks it for (rerank_candidates_capped "
        "in the log when it is lower)",
    )
    # 400: the Reranker only starts a batch predicted to finish in time, at 1.5×
    # its measured cost (services/reranker/batch_cost.py), so the budget must
    # hold 1.5 × the default candidates' real cost plus the reply's margin. At
    # 300 ms, 4 English pairs (~170-250 ms) were split and came back partial in
    # 10 of 20 `make run` demo searches (0 of 20 at 400 ms); the budget caps
    # the wait, it does not lengthen an answer whose pairs finish sooner.
    rerank_budget_ms: int = Field(400, ge=10, le=60_000)
    rerank_languages: str = Field(
        "en",
        pattern=r"^\s*(\*|[a-z]{2,3}(\s*,\s*[a-z]{2,3})*)\s*$",
        description="languages the Reranker's model reads (comma list, * for every one); "
        "a question or candidate mostly in another (Chinese, Japanese, Korean) is not sent and "
        "keeps its fused place. en: packaged:ms-marco-MiniLM-L-12-v2, the default model",
    )
    # The final order of the scored candidates: weighted RRF of their fused
    # rank and their reranker rank; fitted on training queries only (the
    # values and their provenance: services.retriever.fusion.FITTED_RERANK_BLEND).
    rerank_fused_weight: float = Field(
        FITTED_RERANK_BLEND.fused_weight,
        ge=0,
        le=10,
        description="weight of the fused rank in the rerank blend (0: the reranker's order)",
    )
    rerank_score_weight: float = Field(
        FITTED_RERANK_BLEND.rerank_weight,
        ge=0,
        le=10,
        description="weight of the reranker's rank in the rerank blend",
    )
    rerank_blend_k: float = Field(
        FITTED_RERANK_BLEND.k, ge=0, le=1000, description="k of the rerank blend's 1 / (k + rank)"
    )
    rerank_gate_margin: float = Field(
        FITTED_RERANK_BLEND.gate,
        ge=0,
        le=100,
        description="how much the reranker's best score must beat the first scored "
        "candidate's before its order is used at all (0: always), in the model's units: "
        "logits for a cross-encoder, sums of cosines for ColBERT",
    )
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

    @model_validator(mode="before")
    @classmethod
    def _fitted_for_model(cls, data: Any) -> Any:
        """The reranking model's fitted rule and languages, and the second
        vector's fitted weight, where not set."""
        if not isinstance(data, dict):
            return data
        # As the Reranker reads it: `PACKAGED:` too, and an unknown packaged
        # name refused (it quietly got the cross-encoder's rule, probe).
        model = model_name(str(data.get("rerank_model", DEFAULT_RERANKER)))
        if model.startswith(PACKAGED_PREFIX):
            data["rerank_model"] = model
            if model not in PACKAGED_RERANKERS:
                known = ", ".join(sorted(PACKAGED_RERANKERS))
                raise ValueError(
                    f"RAG_RERANK_MODEL={model} is not a packaged model: known are {known}"
                )
        fitted = FITTED_RERANK.get(model, FITTED_RERANK[DEFAULT_RERANKER])
        data.setdefault("rerank_candidates", fitted.candidates)
        data.setdefault("rerank_fused_weight", fitted.blend.fused_weight)
        data.setdefault("rerank_score_weight", fitted.blend.rerank_weight)
        data.setdefault("rerank_blend_k", fitted.blend.k)
        data.setdefault("rerank_gate_margin", fitted.blend.gate)
        data.setdefault("rerank_languages", ",".join(sorted(reranker_languages(model))))
        second = str(data.get("cross_lingual_model", "")).strip()
        data.setdefault("cross_lingual_weight", FITTED_SECOND_WEIGHT.get(second, 1.0))
        return data

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
        if self.rerank_fused_weight == 0 and self.rerank_score_weight == 0:
            # A blend with no weight scores every candidate 0: reranking that orders nothing.
            raise ValueError(
                "RAG_RERANK_FUSED_WEIGHT and RAG_RERANK_SCORE_WEIGHT are both 0: give one a weight "
                "(or turn reranking off with RAG_RERANKER_ADDR empty)"
            )
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
