"""JSON ↔ Retriever proto, field by field.

Explicit rather than `json_format`, so the JSON names and enum spellings stay
stable when the proto grows (enums appear as lower-case words without their
prefix: `CHANNEL_VECTOR` → `"vector"`). The Retriever's free-text reasons
become codes (gateway/reasons.py); the text itself, the rerank model and the
channels' errors are copied only when `trusted` (RAG_GATEWAY_DEBUG_REASONS
and a debug request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway import schema
from gateway.reasons import MESSAGES, degradation_code, public_component, rerank_code
from gateway.snippets import BIDI_CONTROLS, Span, highlighted_snippet, valid_spans
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb


def to_retrieve_request(
    request: schema.SearchRequest, query: str, top_k: int, debug: bool
) -> pb.RetrieveRequest:
    scope = request.scope
    page_url = request.page_url.strip().split("#", 1)[0]
    # "This page" forces the Retriever's current-page intent: it never widens
    # to the whole site and reports a page that is not indexed as such.
    intent = pb.INTENT_CURRENT_PAGE if request.this_page else pb.INTENT_UNSPECIFIED
    return pb.RetrieveRequest(
        query=query,
        top_k=top_k,
        page_url=page_url,
        debug=debug,
        intent=intent,
        filter=pb.ScopeFilter(
            scope_id=scope.scope_id,
            scope_ids=scope.scope_ids,
            locale=scope.locale,
            doc_ids=scope.doc_ids,
            urls=list(scope.urls),
            metadata=scope.metadata,
        ),
        query_language=request.query_language,
        group_by_document=request.group_by_document,
        page_token=request.page_token,
        fusion=pb.Fusion(method=_FUSION_METHODS[request.fusion.method], rrf_k=request.fusion.rrf_k),
        boosts=_boosts(request.boosts),
        diversity=pb.Diversity(
            mmr_lambda=request.diversity.mmr_lambda, window=request.diversity.window
        ),
    )


_DECAY = {
    "exp": pb.DECAY_FUNCTION_EXP,
    "gauss": pb.DECAY_FUNCTION_GAUSS,
    "linear": pb.DECAY_FUNCTION_LINEAR,
}


def _boosts(boosts: schema.Boosts) -> pb.Boosts:
    metadata = [
        pb.MetadataBoost(key=b.key, value=b.value, weight=b.weight) for b in boosts.metadata
    ]
    if boosts.recency is None:
        return pb.Boosts(metadata=metadata)
    r = boosts.recency
    recency = pb.RecencyBoost(
        weight=r.weight,
        scale_days=r.scale_days,
        offset_days=r.offset_days,
        decay=r.decay,
        function=_DECAY[r.function],
        origin=r.origin,
    )
    return pb.Boosts(recency=recency, metadata=metadata)


_FUSION_METHODS = {
    None: pb.FUSION_METHOD_UNSPECIFIED,
    "rrf": pb.FUSION_METHOD_RRF,
    "min_max": pb.FUSION_METHOD_MIN_MAX,
    "dbsf": pb.FUSION_METHOD_DBSF,
}


def _label(enum: Any, value: int, prefix: str) -> Any:
    """`pb.Channel, 1, "CHANNEL_"` → "vector" (unknown numbers: "unspecified")."""
    try:
        name = enum.Name(value)
    except ValueError:
        return "unspecified"
    return name.removeprefix(prefix).lower()


def _channels(matches: Any) -> list[schema.ChannelMatch]:
    return [
        schema.ChannelMatch(
            channel=_label(pb.Channel, m.channel, "CHANNEL_"),
            rank=m.rank,
            score=m.score,
            contribution=m.contribution,
        )
        for m in matches
    ]


def _spans(spans: Sequence[Span]) -> list[schema.Span]:
    return [schema.Span(start=s.start, end=s.end, identifier=s.identifier) for s in spans]


def _hit(hit: pb.Hit, citation: int | None) -> schema.Hit:
    highlights = valid_spans(
        (Span(h.start, h.end, h.identifier) for h in hit.highlights), len(hit.text)
    )
    excerpt = highlighted_snippet(hit.text, highlights)
    return schema.Hit(
        rank=hit.rank,
        citation=citation,
        chunk_id=hit.chunk_id,
        doc_id=hit.doc_id,
        url=hit.url,
        title=hit.title,
        heading_path=BIDI_CONTROLS.sub("", hit.heading_path),
        snippet=excerpt.text,
        snippet_highlights=_spans(excerpt.spans),
        text=hit.text,
        highlights=_spans(highlights),
        exact_identifiers=list(hit.exact_identifiers),
        position=hit.position,
        scope_id=hit.scope_id,
        locale=hit.locale,
        score=hit.score,
        fused_score=hit.fused_score,
        reranked=hit.reranked,
        rerank_score=hit.rerank_score if hit.reranked else None,
        channels=_channels(hit.channels),
        translations=[
            schema.Translation(locale=t.locale, url=t.url, doc_id=t.doc_id)
            for t in hit.translations
        ],
        group=hit.group or None,
        boost=hit.boost or 1.0,
        boost_reasons=list(hit.boost_reasons),
    )


def _citation(c: pb.Citation) -> schema.Citation:
    return schema.Citation(
        number=c.number,
        chunk_id=c.chunk_id,
        doc_id=c.doc_id,
        url=c.url,
        title=c.title,
        heading_path=c.heading_path,
    )


def _debug(report: pb.DebugReport, trusted: bool) -> schema.DebugReport:
    channels = [
        schema.ChannelReport(
            channel=_label(pb.Channel, c.channel, "CHANNEL_"),
            status=_label(pb.ChannelStatus, c.status, "CHANNEL_STATUS_"),
            latency_ms=c.latency_ms,
            hits=c.hits,
            error=c.error if trusted else None,
        )
        for c in report.channels
    ]
    return schema.DebugReport(
        channels=channels,
        normalized_query=report.normalized_query,
        lexical_query=report.lexical_query,
        notes=list(report.notes),
    )


def _rerank(r: pb.RerankOutcome, trusted: bool) -> schema.Rerank:
    code = rerank_code(r)
    return schema.Rerank(
        used=r.used,
        fallback=r.fallback,
        code=code,
        message=MESSAGES[code],
        reason=r.reason if trusted else None,
        candidates=r.candidates,
        reranked=r.reranked,
        model=r.model if trusted else None,
        latency_ms=r.latency_ms,
    )


def _degradation(d: pb.Degradation, rerank: pb.RerankOutcome, trusted: bool) -> schema.Degradation:
    code = degradation_code(d, rerank)
    return schema.Degradation(
        component=public_component(d.component),
        code=code,
        message=MESSAGES[code],
        reason=d.reason if trusted else None,
    )


def to_search_response(
    response: pb.RetrieveResponse,
    request_id: str,
    debug: bool,
    message: str = "",
    trusted: bool = False,
) -> schema.SearchResponse:
    trusted = trusted and debug  # the Retriever's words ride only on a debug answer
    citation_of = {c.chunk_id: c.number for c in response.evidence.citations}
    evidence = response.evidence
    return schema.SearchResponse(
        request_id=request_id,
        intent=_label(pb.Intent, response.intent, "INTENT_"),
        page_status=_label(pb.PageStatus, response.page_status, "PAGE_STATUS_"),
        query_language=response.query_language,
        message=response.message or message,
        hits=[_hit(h, citation_of.get(h.chunk_id)) for h in response.hits],
        evidence=schema.Evidence(
            text=evidence.text,
            chars=evidence.chars,
            dropped_chunks=evidence.dropped_chunks,
            truncated=evidence.truncated,
        ),
        citations=[_citation(c) for c in evidence.citations],
        rerank=_rerank(response.rerank, trusted),
        degraded=[_degradation(d, response.rerank, trusted) for d in response.degraded],
        timings_ms={t.stage: t.ms for t in response.timings},
        next_page_token=response.next_page_token,
        debug=_debug(response.debug, trusted) if debug and response.HasField("debug") else None,
    )
