"""Fusion's step of Retrieve: the channels' lists fused into one candidate
list (each locale apart, then in turns, when the fan-out ranked locales
apart: services.retriever.locale_balance), then exact-identifier precedence,
the weak vector-only cut and the per-document cap."""

from __future__ import annotations

from dataclasses import dataclass, replace

from services.core.analysis import UNDETERMINED
from services.core.analysis.query_shape import QueryShape
from services.retriever.channels import ChannelOutcome
from services.retriever.exact import exact_precedence, with_exact_matches
from services.retriever.fan_out import FanOut
from services.retriever.fusion import ListFuser, cap_per_document, drop_weak_vector_only
from services.retriever.language import language_weights
from services.retriever.locale_balance import LocaleLists, fuse_locales
from services.retriever.requests import PreparedQuery, RetrievalConfig, RetrievalRequest
from services.retriever.score_fusion import fuser_for
from services.retriever.types import Channel, FusedHit


@dataclass(frozen=True)
class Fused:
    """Fusion's product, before the precedence, the cuts and the boosts."""

    hits: list[FusedHit]
    locales: LocaleLists  # the per-locale lists, with the order the locales took turns in
    weight_note: str  # "" or (debug) the question weight that set the vector channel's


KEYWORDS_NOTE = "not a question: no crossing by evidence"


class CandidateFusion:
    def __init__(self, config: RetrievalConfig) -> None:
        self.config = config
        self.fuser = fuser_for(config.fusion, config.rrf_k)
        self.order_rules = config.order_rules()

    def fuse(self, request: RetrievalRequest, prepared: PreparedQuery, searched: FanOut) -> Fused:
        """The fused list, the per-locale lists with the order the locales
        took turns in (when they were ranked apart), and (debug) what the
        question weight did."""
        configured = channel_weights(self.config, request.weights, prepared.shape)
        weights = dict(language_weights(configured, prepared.language) or {})
        weights = without_second_voice_for_keywords(
            weights, self.config, request.weights, prepared.shape
        )
        note = question_weight_note(self.config, request, prepared.shape) if request.debug else ""
        hits, lists = self._fused(request, prepared, searched, weights)
        return Fused(hits, lists, note)

    def _fused(
        self,
        request: RetrievalRequest,
        prepared: PreparedQuery,
        searched: FanOut,
        weights: dict[Channel, float],
    ) -> tuple[list[FusedHit], LocaleLists]:
        vector, lexical, lists = searched.vector, searched.lexical, searched.locales
        fuser = self._fuser(request)
        cross = searched.cross_lingual.hits if searched.cross_lingual.ok else []
        if not (lists.vector and vector.ok):
            outcomes = (vector, lexical, searched.cross_lingual)
            ranked = {outcome.channel: outcome.hits for outcome in outcomes if outcome.ok}
            return fuser.fuse(ranked, weights), lists
        rule = self.order_rules.for_shape(prepared.shape)
        fused, order = fuse_locales(
            fuser,
            lists.vector,
            lexical.hits if lexical.ok else [],
            prepared.language.language,
            weights,
            lists.translated if lexical.ok else {},
            rule=rule,
            cross_lingual=cross,
            question_vector=lists.question_vector,
        )
        keywords = rule is self.order_rules.keywords
        if keywords and prepared.language.language not in ("", UNDETERMINED):
            order = replace(order, reason=f"{order.reason} ({KEYWORDS_NOTE})")
        return fused, replace(lists, order=order)

    def place(
        self,
        request: RetrievalRequest,
        prepared: PreparedQuery,
        fused: list[FusedHit],
        lexical: ChannelOutcome,
    ) -> list[FusedHit]:
        """Exact-identifier precedence, the weak vector-only cut and the
        per-document cap over the fused list."""
        held = {hit.chunk.chunk_id: hit.exact for hit in lexical.hits} if lexical.ok else {}
        fused = with_exact_matches(fused, prepared.plan.identifiers, held)
        fused = exact_precedence(fused, self.config.exact_precedence)
        fused = drop_weak_vector_only(fused, request.min_vector_score)
        per_doc = request.max_chunks_per_document or self.config.max_chunks_per_document
        return cap_per_document(fused, per_doc)

    def _fuser(self, request: RetrievalRequest) -> ListFuser:
        """The configured fuser, or the one the request asks for."""
        if request.fusion is None and not request.rrf_k:
            return self.fuser
        method = request.fusion or self.config.fusion
        return fuser_for(method, request.rrf_k or self.config.rrf_k)


def channel_weights(
    config: RetrievalConfig,
    requested: dict[Channel, float] | None,
    shape: QueryShape | None = None,
) -> dict[Channel, float]:
    """The request's channel weights over the configured ones (RAG_*_WEIGHT;
    RAG_QUESTION_VECTOR_WEIGHT for a query that reads as a question)."""
    configured = {
        Channel.VECTOR: question_weight(config, shape) or config.vector_weight,
        Channel.LEXICAL: config.lexical_weight,
        Channel.CROSS_LINGUAL: config.cross_lingual_weight,
    }
    return configured | (requested or {})


def without_second_voice_for_keywords(
    weights: dict[Channel, float],
    config: RetrievalConfig,
    requested: dict[Channel, float] | None,
    shape: QueryShape,
) -> dict[Channel, float]:
    """`weights` with the second vector's list left out for a query that does
    not read as a question, where the first model's list is there too: a
    sentence encoder cannot place a few remembered words, and a second
    semantic list beside the first outvoted the lexical one on them
    (known-item set, words-2 hit@1 0.33 -> 0.45 without it;
    bench/results/notes/keyword_locale_order.md). Kept when the request weighs
    it, and when it is the only semantic list (a first model that does not
    read the query's language)."""
    if shape.reads_as_question(config.question_min_words):
        return weights
    if Channel.CROSS_LINGUAL in (requested or {}) or not weights.get(Channel.VECTOR):
        return weights
    return weights | {Channel.CROSS_LINGUAL: 0.0}


def question_weight(config: RetrievalConfig, shape: QueryShape | None) -> float | None:
    """The vector weight for a query that reads as a question (None: it does not)."""
    if shape is None or not shape.reads_as_question(config.question_min_words):
        return None
    return config.question_vector_weight


def question_weight_note(
    config: RetrievalConfig, request: RetrievalRequest, shape: QueryShape
) -> str:
    """Said (with debug on) when the question weight set the vector channel's."""
    weight = question_weight(config, shape)
    asked = Channel.VECTOR in (request.weights or {})
    if weight is None or weight == config.vector_weight or asked:
        return ""
    return (
        f"vector weight {weight:g} for a question ({shape.words} words, "
        f"{shape.function_words} function words; RAG_QUESTION_VECTOR_WEIGHT)"
    )
