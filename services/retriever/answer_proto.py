"""What the pipeline found, as the protos a Retrieve and an IndexStatus answer with."""

from __future__ import annotations

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.translation_links import TRANSLATIONS_KEY, decode_translations
from services.retriever.channels import ChannelStatus
from services.retriever.request_proto import CHANNELS_TO_PROTO, INTENTS_TO_PROTO
from services.retriever.requests import RetrievalResult
from services.retriever.reranking import RerankOutcome
from services.retriever.types import FusedHit
from services.storage.visibility import ReleaseVerdict

_STATUSES = {
    ChannelStatus.OK: pb.CHANNEL_STATUS_OK,
    ChannelStatus.ERROR: pb.CHANNEL_STATUS_ERROR,
    ChannelStatus.TIMEOUT: pb.CHANNEL_STATUS_TIMEOUT,
    ChannelStatus.SKIPPED: pb.CHANNEL_STATUS_SKIPPED,
}


def rerank_outcome_to_proto(r: RerankOutcome) -> pb.RerankOutcome:
    return pb.RerankOutcome(
        used=r.used,
        fallback=r.fallback,
        reason=r.reason,
        candidates=r.candidates,
        reranked=r.reranked,
        model=r.model,
        latency_ms=r.latency_ms,
        code=r.code,
    )


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
                channel=CHANNELS_TO_PROTO[r.channel],
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
        intent=INTENTS_TO_PROTO[result.intent],
        page_status=page_status,
        rerank=rerank_outcome_to_proto(r),
        degraded=[
            pb.Degradation(component=d.component, reason=d.reason, code=d.code)
            for d in result.degraded
        ],
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
                        channel=CHANNELS_TO_PROTO[o.channel],
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
