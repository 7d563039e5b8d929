"""gRPC adapter for the Retriever: proto messages ↔ RetrievalPipeline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import grpc

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2_grpc
from services.core.deadline import Deadline
from services.core.errors import InvalidArgument
from services.core.field_rules import (
    MAX_LANGUAGE_TAG_CHARS,
    hidden_character_problem,
    language_tag_problem,
)
from services.core.models import ScopeFilter
from services.core.translation_links import TRANSLATIONS_KEY, decode_translations
from services.core.web_url import url_identity_problem
from services.retriever.boost_proto import boosts_from_proto
from services.retriever.channels import ChannelStatus
from services.retriever.diversity import Diversity
from services.retriever.fusion import validate_weights
from services.retriever.pipeline import RetrievalPipeline, RetrievalRequest, RetrievalResult
from services.retriever.score_fusion import FusionMethod
from services.retriever.types import Channel, FusedHit, Intent
from services.runtime import grpc_errors
from services.runtime.security.callers import Caller, Role, method_roles
from services.runtime.security.scopes import readable_scope, readable_scopes
from services.runtime.security.server_auth import current_caller
from services.storage.visibility import ReleaseVerdict

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Retriever"].full_name
METHOD_ROLES = method_roles(SERVICE_NAME, {"Retrieve": Role.READER, "IndexStatus": Role.READER})

_CHANNELS = {
    Channel.VECTOR: pb.CHANNEL_VECTOR,
    Channel.LEXICAL: pb.CHANNEL_LEXICAL,
    Channel.CROSS_LINGUAL: pb.CHANNEL_CROSS_LINGUAL,
}
_INTENTS = {Intent.SITE_SEARCH: pb.INTENT_SITE_SEARCH, Intent.CURRENT_PAGE: pb.INTENT_CURRENT_PAGE}
_STATUSES = {
    ChannelStatus.OK: pb.CHANNEL_STATUS_OK,
    ChannelStatus.ERROR: pb.CHANNEL_STATUS_ERROR,
    ChannelStatus.TIMEOUT: pb.CHANNEL_STATUS_TIMEOUT,
    ChannelStatus.SKIPPED: pb.CHANNEL_STATUS_SKIPPED,
}
_FUSION_OF_PROTO: dict[int, FusionMethod] = {
    pb.FUSION_METHOD_RRF: FusionMethod.RRF,
    pb.FUSION_METHOD_MIN_MAX: FusionMethod.MIN_MAX,
    pb.FUSION_METHOD_DBSF: FusionMethod.DBSF,
}
_CHANNEL_OF_PROTO: dict[int, Channel] = {int(v): k for k, v in _CHANNELS.items()}
_INTENT_OF_PROTO: dict[int, Intent] = {int(v): k for k, v in _INTENTS.items()}


@dataclass(frozen=True)
class RequestLimits:
    """Bounds of a Retrieve request, checked before any work is done (the
    Retriever settings of the same names)."""

    max_raw_query_chars: int = 100_000
    max_page_url_chars: int = 2048
    max_filter_doc_ids: int = 1000
    max_filter_urls: int = 1000
    max_filter_value_chars: int = 2048
    max_filter_metadata_entries: int = 64
    max_filter_metadata_key_chars: int = 128
    max_filter_scope_id_chars: int = 128
    max_filter_scope_ids: int = 64

    @classmethod
    def from_settings(cls, settings: Any) -> RequestLimits:
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


def request_from_proto(
    msg: pb.RetrieveRequest, limits: RequestLimits = RequestLimits()
) -> RetrievalRequest:
    """The domain request; InvalidArgument naming the field and the limit for
    anything out of bounds, before any work (a bounded query and filter keep
    every later step cheap)."""
    check_request(msg, limits)
    f = msg.filter
    scope = ScopeFilter(
        scope_id=f.scope_id,
        scope_ids=tuple(f.scope_ids),
        locale=f.locale,
        doc_ids=tuple(f.doc_ids),
        urls=tuple(f.urls),
        metadata=tuple(sorted(f.metadata.items())),
    )
    return RetrievalRequest(
        query=msg.query,
        top_k=msg.top_k,
        scope=scope,
        page_url=msg.page_url,
        debug=msg.debug,
        rerank=not msg.disable_rerank,
        weights=request_weights(msg.weights),
        max_chunks_per_document=msg.max_chunks_per_document,
        context_char_budget=msg.context_char_budget,
        min_vector_score=msg.min_vector_score,
        candidates_per_channel=msg.candidates_per_channel,
        channels=_channels(msg.channels),
        intent=_intent(msg.intent),
        query_language=msg.query_language,
        group_by_document=msg.group_by_document,
        page_token=msg.page_token,
        fusion=_fusion(msg.fusion.method),
        rrf_k=msg.fusion.rrf_k,
        boosts=boosts_from_proto(msg.boosts),
        diversity=Diversity(msg.diversity.mmr_lambda, msg.diversity.window),
    )


def check_request(msg: pb.RetrieveRequest, limits: RequestLimits) -> None:
    _check_chars("query", msg.query, limits.max_raw_query_chars)
    _check_chars("page_url", msg.page_url, limits.max_page_url_chars)
    _check_url("page_url", msg.page_url)
    _check_language_tag("query_language", msg.query_language)
    if msg.context_char_budget < 0:
        raise InvalidArgument(
            f"context_char_budget: {msg.context_char_budget} must not be negative"
        )
    check_filter(msg.filter, limits)


def check_filter(f: pb.ScopeFilter, limits: RequestLimits) -> None:
    _check_chars("filter.scope_id", f.scope_id, limits.max_filter_scope_id_chars)
    _check_one_line("filter.scope_id", f.scope_id)
    _check_language_tag("filter.locale", f.locale)
    if len(f.scope_ids) > limits.max_filter_scope_ids:
        raise InvalidArgument(
            f"filter.scope_ids: {len(f.scope_ids)} values, limit is {limits.max_filter_scope_ids}"
        )
    for index, scope_id in enumerate(f.scope_ids):
        _check_chars(f"filter.scope_ids[{index}]", scope_id, limits.max_filter_scope_id_chars)
        _check_one_line(f"filter.scope_ids[{index}]", scope_id)
        if not scope_id:
            raise InvalidArgument(f"filter.scope_ids[{index}]: empty")
    if f.scope_id and f.scope_ids:
        raise InvalidArgument(
            "filter.scope_ids: give filter.scope_id or filter.scope_ids, not both"
        )
    _check_list("filter.doc_ids", f.doc_ids, limits.max_filter_doc_ids, limits)
    _check_list("filter.urls", f.urls, limits.max_filter_urls, limits)
    for index, url in enumerate(f.urls):
        _check_url(f"filter.urls[{index}]", url)
    if len(f.metadata) > limits.max_filter_metadata_entries:
        raise InvalidArgument(
            f"filter.metadata: {len(f.metadata)} entries, "
            f"limit is {limits.max_filter_metadata_entries}"
        )
    for key, value in f.metadata.items():
        _check_chars("filter.metadata key", key, limits.max_filter_metadata_key_chars)
        _check_one_line(f"filter.metadata key {key[:40]!r}", key)
        _check_chars(f"filter.metadata[{key!r}]", value, limits.max_filter_value_chars)
        _check_one_line(f"filter.metadata[{key!r}]", value, line_breaks=True)


def _check_list(field: str, values: Sequence[str], limit: int, limits: RequestLimits) -> None:
    if len(values) > limit:
        raise InvalidArgument(f"{field}: {len(values)} values, limit is {limit}")
    for index, value in enumerate(values):
        _check_chars(f"{field}[{index}]", value, limits.max_filter_value_chars)


def _check_chars(field: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{field}: {len(value)} characters, limit is {limit}")


def _check_language_tag(field: str, tag: str) -> None:
    """Empty, or a well-formed BCP 47 tag (services.core.field_rules)."""
    _check_chars(field, tag, MAX_LANGUAGE_TAG_CHARS)
    problem = language_tag_problem(tag) if tag else None
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def _check_one_line(field: str, value: str, line_breaks: bool = False) -> None:
    """No control or format character (a metadata value may break lines)."""
    problem = hidden_character_problem(value, line_breaks=line_breaks)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def _check_url(field: str, url: str) -> None:
    """No credentials, no mixed-script host (services.core.web_url): any
    scheme, since the page a user is on need not be a web page."""
    problem = url_identity_problem(url)
    if problem is not None:
        raise InvalidArgument(f"{field}: {problem}")


def _intent(value: int) -> Intent | None:
    """INTENT_UNSPECIFIED routes by rules; an unknown number is the caller's mistake."""
    if value == pb.INTENT_UNSPECIFIED:
        return None
    if value not in _INTENT_OF_PROTO:
        raise InvalidArgument(f"intent: unknown value {value}")
    return _INTENT_OF_PROTO[value]


def _fusion(value: int) -> FusionMethod | None:
    """FUSION_METHOD_UNSPECIFIED: the server's default."""
    if value == pb.FUSION_METHOD_UNSPECIFIED:
        return None
    if value not in _FUSION_OF_PROTO:
        raise InvalidArgument(f"fusion.method: unknown value {value}")
    return _FUSION_OF_PROTO[value]


def _channels(requested: Sequence[int]) -> frozenset[Channel]:
    unknown = [c for c in requested if c not in _CHANNEL_OF_PROTO]
    if unknown:
        raise InvalidArgument(f"channels: unknown channel value(s) {unknown}")
    return frozenset(_CHANNEL_OF_PROTO[c] for c in requested) or frozenset(Channel)


def request_weights(msg: pb.ChannelWeights) -> dict[Channel, float] | None:
    """The channels the request weighs; 0 means "the configured default"
    (RAG_VECTOR_WEIGHT, RAG_LEXICAL_WEIGHT, RAG_CROSS_LINGUAL_WEIGHT, applied
    at fusion), so clients that never set weights get the configured fusion."""
    given = {
        channel: weight
        for channel, weight in (
            (Channel.VECTOR, msg.vector),
            (Channel.LEXICAL, msg.lexical),
            (Channel.CROSS_LINGUAL, msg.cross_lingual),
        )
        if weight != 0.0
    }
    return validate_weights(given) or None


def hit_to_proto(hit: FusedHit, rank: int) -> pb.Hit:
    c = hit.chunk
    return pb.Hit(
        chunk_id=c.chunk_id,
        doc_id=c.doc_id,
        url=c.url,
        title=c.title,
        heading_path=c.heading_path,
        text=c.text,
        position=c.position,
        scope_id=c.scope_id,
        locale=c.locale,
        rank=rank,
        score=hit.rerank_score if hit.rerank_score is not None else hit.fused_score * hit.boost,
        fused_score=hit.fused_score,
        channels=[
            pb.ChannelMatch(
                channel=_CHANNELS[r.channel],
                rank=r.rank,
                score=r.score,
                contribution=r.contribution,
            )
            for r in hit.channels
        ],
        reranked=hit.reranked,
        boost=hit.boost,
        boost_reasons=hit.boost_reasons,
        rerank_score=hit.rerank_score or 0.0,
        highlights=[
            pb.Span(start=span.start, end=span.end, identifier=span.identifier)
            for span in hit.highlights
        ],
        exact_identifiers=list(hit.exact),
        translations=hit_translations(c.metadata),
        group=hit.group,
    )


def hit_translations(metadata: dict[str, str]) -> list[pb.Translation]:
    """The hit's page in other languages, from its `metadata["translations"]`
    (services.core.translation_links): carried as they are, never reordering
    anything; a malformed value carries none."""
    return [
        pb.Translation(locale=t.locale, url=t.url, doc_id=t.doc_id)
        for t in decode_translations(metadata.get(TRANSLATIONS_KEY, ""))
    ]


def result_to_proto(result: RetrievalResult, debug: bool) -> pb.RetrieveResponse:
    r = result.rerank
    page_status = {
        None: pb.PAGE_STATUS_UNSPECIFIED,
        True: pb.PAGE_STATUS_INDEXED,
        False: pb.PAGE_STATUS_NOT_INDEXED,
    }[result.page_indexed]
    ev = result.evidence
    response = pb.RetrieveResponse(
        hits=[hit_to_proto(h, i) for i, h in enumerate(result.hits, start=result.hits_before + 1)],
        intent=_INTENTS[result.intent],
        page_status=page_status,
        rerank=pb.RerankOutcome(
            used=r.used,
            fallback=r.fallback,
            reason=r.reason,
            candidates=r.candidates,
            reranked=r.reranked,
            model=r.model,
            latency_ms=r.latency_ms,
        ),
        degraded=[pb.Degradation(component=c, reason=why) for c, why in result.degraded],
        message=result.message,
        timings=[pb.StageTiming(stage=s, ms=ms) for s, ms in result.timings],
        query_language=result.query_language,
        next_page_token=result.next_page_token,
        evidence=pb.Evidence(
            text=ev.text,
            chars=ev.chars,
            dropped_chunks=ev.dropped_chunks,
            truncated=ev.truncated,
            citations=[
                pb.Citation(
                    number=c.number,
                    chunk_id=c.chunk_id,
                    doc_id=c.doc_id,
                    url=c.url,
                    title=c.title,
                    heading_path=c.heading_path,
                )
                for c in ev.citations
            ],
        ),
    )
    if debug:
        response.debug.CopyFrom(
            pb.DebugReport(
                channels=[
                    pb.ChannelReport(
                        channel=_CHANNELS[o.channel],
                        status=_STATUSES[o.status],
                        latency_ms=o.latency_ms,
                        hits=len(o.hits),
                        error=o.error,
                    )
                    for o in result.channels
                ],
                normalized_query=result.normalized_query,
                lexical_query=result.lexical_query,
                notes=result.notes,
            )
        )
    return response


# The committed generation being served and the latest release verdict, if any.
IndexStatusSource = Callable[[], tuple[int, ReleaseVerdict | None]]


def _readable(scope: ScopeFilter, caller: Caller) -> ScopeFilter:
    """The scope(s) the read runs in, each checked against the caller's grant;
    one scope asked for in scope_ids is searched as scope_id."""
    if not scope.scope_ids:
        return replace(scope, scope_id=readable_scope(scope.scope_id, caller))
    scope_ids = readable_scopes(scope.scope_ids, caller)
    if len(scope_ids) == 1:
        return replace(scope, scope_id=scope_ids[0], scope_ids=())
    return replace(scope, scope_ids=scope_ids)


def index_status_to_proto(
    generation: int, verdict: ReleaseVerdict | None
) -> pb.IndexStatusResponse:
    if verdict is None:
        return pb.IndexStatusResponse(committed_generation=generation)
    return pb.IndexStatusResponse(
        committed_generation=generation,
        release_recorded=True,
        release_generation=verdict.generation,
        release_passed=verdict.passed,
        release_recorded_at=verdict.recorded_at,
        release_current=verdict.covers(generation),
    )


class RetrieverServicer(retriever_pb2_grpc.RetrieverServicer):
    def __init__(
        self,
        pipeline: RetrievalPipeline,
        default_deadline_ms: int,
        index_status: IndexStatusSource | None = None,
        limits: RequestLimits | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.limits = limits or RequestLimits()
        self.default_deadline_s = default_deadline_ms / 1000
        # None (no manifest to read): generation 0 and no release, so a Gateway
        # that requires a release stays closed instead of guessing.
        self.index_status = index_status

    @grpc_errors.unary
    async def Retrieve(
        self, request: pb.RetrieveRequest, context: grpc.aio.ServicerContext
    ) -> pb.RetrieveResponse:
        deadline = Deadline.from_grpc(context, self.default_deadline_s)
        retrieval = request_from_proto(request, self.limits)
        retrieval = replace(retrieval, scope=_readable(retrieval.scope, current_caller()))
        result = await self.pipeline.retrieve(retrieval, deadline)
        return result_to_proto(result, request.debug)

    @grpc_errors.unary
    async def IndexStatus(
        self, request: pb.IndexStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.IndexStatusResponse:
        if self.index_status is None:
            return index_status_to_proto(0, None)
        generation, verdict = await asyncio.to_thread(self.index_status)  # reads the manifest
        return index_status_to_proto(generation, verdict)
