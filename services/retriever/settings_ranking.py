"""The Retriever's ranking settings: how the channels' lists are fused,
how locales take turns, and how the Reranker's scores are blended in
(environment variables with the RAG_ prefix, read by RetrieverSettings).

Apart from services.retriever.settings because they change together: the
rerank_* defaults follow the reranking model's fitted rule, and the second
vector's weight follows its model, both filled in by `_fitted_for_model`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

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
from services.retriever.score_fusion import FusionMethod
from services.retriever.translation_deferral import THRESHOLD as DEFERRAL_THRESHOLD


class RankingSettings(BaseModel):
    """A settings mixin: fusion, locale turns and the rerank blend."""

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
    def _blend_has_weight(self) -> RankingSettings:
        if self.rerank_fused_weight == 0 and self.rerank_score_weight == 0:
            # A blend with no weight scores every candidate 0: reranking that orders nothing.
            raise ValueError(
                "RAG_RERANK_FUSED_WEIGHT and RAG_RERANK_SCORE_WEIGHT are both 0: give one a weight "
                "(or turn reranking off with RAG_RERANKER_ADDR empty)"
            )
        return self
