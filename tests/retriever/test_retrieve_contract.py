"""The retrieval contract through the real Retrieve RPC: scoping in both
channels, current-page routing, per-document caps, hostile lexical input and
the debug report."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from tests.support.corpus import corpus_documents, url_of
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration

LONG_GUIDE = "# Long guide\n\n" + "\n\n".join(
    f"## Step {i}\n\n" + f"Step {i} of the rollout checklist explains the canary phase. " * 10
    for i in range(8)
)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(tmp_path_factory.mktemp("contract"), embedder).start()
    docs = [
        *corpus_documents("handbook"),
        ipb.Document(
            doc_id="other/backups.md",
            url="https://other.example/backups",
            title="Other backups",
            locale="en",
            scope_id="other",
            text="# Backups\n\nSnapshot both stores nightly.",
        ),
        ipb.Document(
            doc_id="de/backups.md",
            url="https://docs.example/de/backups",
            title="Sicherungen",
            locale="de",
            scope_id="handbook",
            text="# Sicherungen\n\nSnapshot beider Speicher.",
        ),
        ipb.Document(
            doc_id="guide.md",
            url="https://docs.example/guide",
            title="Long guide",
            locale="en",
            scope_id="handbook",
            text=LONG_GUIDE,
        ),
    ]
    assert stack.upsert(docs).counts.rejected == 0
    yield stack
    stack.stop()


def by_channel(reply: rpb.RetrieveResponse, channel: int) -> set[str]:
    return {h.url for h in reply.hits if any(m.channel == channel for m in h.channels)}


@pytest.mark.parametrize(
    ("scope", "allowed"),
    [
        (rpb.ScopeFilter(scope_id="other"), {"https://other.example/backups"}),
        (rpb.ScopeFilter(locale="de"), {"https://docs.example/de/backups"}),
        (
            rpb.ScopeFilter(doc_ids=["backups.md", "billing.md"]),
            {url_of("backups.md"), url_of("billing.md")},
        ),
        (rpb.ScopeFilter(urls=[url_of("backups.md")]), {url_of("backups.md")}),
        (
            rpb.ScopeFilter(scope_id="handbook", metadata={"section": "ops"}),
            {url_of("backups.md"), url_of("deployment.md"), url_of("supervisor.md")},
        ),
    ],
)
def test_scope_filters_apply_in_both_channels(stack: BackgroundStack, scope, allowed) -> None:  # type: ignore[no-untyped-def]
    reply = stack.retrieve("snapshot backups stores restore", top_k=10, filter=scope, debug=True)
    assert reply.hits
    assert {h.url for h in reply.hits} <= allowed
    assert by_channel(reply, rpb.CHANNEL_VECTOR) <= allowed
    assert by_channel(reply, rpb.CHANNEL_LEXICAL) <= allowed
    assert by_channel(reply, rpb.CHANNEL_LEXICAL), "the lexical channel must contribute too"


def test_current_page_retrieves_only_that_page(stack: BackgroundStack) -> None:
    reply = stack.retrieve("summarize this page", page_url=url_of("billing.md"), top_k=5)
    assert reply.intent == rpb.INTENT_CURRENT_PAGE
    assert reply.page_status == rpb.PAGE_STATUS_INDEXED
    assert reply.hits and {h.url for h in reply.hits} == {url_of("billing.md")}


def test_current_page_not_indexed_never_falls_back_to_site_search(stack: BackgroundStack) -> None:
    reply = stack.retrieve("summarize this page", page_url="https://docs.example/missing", top_k=5)
    assert reply.intent == rpb.INTENT_CURRENT_PAGE
    assert reply.page_status == rpb.PAGE_STATUS_NOT_INDEXED
    assert list(reply.hits) == []
    assert "not indexed" in reply.message


def test_general_question_with_page_url_is_site_search(stack: BackgroundStack) -> None:
    reply = stack.retrieve("how are rate limits enforced", page_url=url_of("billing.md"), top_k=5)
    assert reply.intent == rpb.INTENT_SITE_SEARCH
    assert len({h.url for h in reply.hits}) > 1


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_per_document_cap(stack: BackgroundStack, cap: int) -> None:
    reply = stack.retrieve(
        "rollout checklist canary phase step", top_k=20, max_chunks_per_document=cap
    )
    per_doc: dict[str, int] = {}
    for hit in reply.hits:
        per_doc[hit.doc_id] = per_doc.get(hit.doc_id, 0) + 1
    assert per_doc["guide.md"] == cap
    assert max(per_doc.values()) <= cap


def test_default_cap_is_two(stack: BackgroundStack) -> None:
    reply = stack.retrieve("rollout checklist canary phase step", top_k=20)
    assert sum(h.doc_id == "guide.md" for h in reply.hits) == 2


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        "(snapshot",
        "snapshot)",
        "AND OR NOT",
        "title:backups",
        "text:* OR *",
        "back* ups?",
        "restore~2",
        "stores^10",
        "[1 TO 5]",
        "{a}",
        "restore \\",  # a lone backslash is refused: no letter, digit or symbol
        "-snapshot +restore",
        "!important",
        "a && b || c",
        "🙂 snapshot",
        "x" * 900,
    ],
)
def test_hostile_lexical_syntax_never_errors(stack: BackgroundStack, query: str) -> None:
    reply = stack.retrieve(query, top_k=5, channels=[rpb.CHANNEL_LEXICAL], debug=True)
    status = {c.channel: c.status for c in reply.debug.channels}
    assert status[rpb.CHANNEL_LEXICAL] == rpb.CHANNEL_STATUS_OK
    assert not reply.degraded


def test_field_prefix_is_not_an_operator(stack: BackgroundStack) -> None:
    reply = stack.retrieve("title:Sicherungen", top_k=5, channels=[rpb.CHANNEL_LEXICAL])
    # Treated as the two words "title" and "Sicherungen", it still finds the German page.
    assert "https://docs.example/de/backups" in {h.url for h in reply.hits}


def test_debug_report_explains_every_hit(stack: BackgroundStack) -> None:
    reply = stack.retrieve("  restore   from\tsnapshots ", top_k=3, debug=True)
    debug = reply.debug
    assert debug.normalized_query == "restore from snapshots"
    assert debug.lexical_query
    assert {c.channel for c in debug.channels} == {rpb.CHANNEL_VECTOR, rpb.CHANNEL_LEXICAL}
    assert all(c.status == rpb.CHANNEL_STATUS_OK and c.hits > 0 for c in debug.channels)
    for hit in reply.hits:
        assert hit.channels and all(m.rank >= 1 for m in hit.channels)
    stages = {t.stage for t in reply.timings}
    assert {"vector", "lexical", "rerank", "evidence", "total"} <= stages


def test_single_channel_requests_are_not_degraded(stack: BackgroundStack) -> None:
    reply = stack.retrieve("restore from snapshots", top_k=3, channels=[rpb.CHANNEL_VECTOR])
    assert reply.hits and not reply.degraded
    assert all([m.channel for m in h.channels] == [rpb.CHANNEL_VECTOR] for h in reply.hits)


def test_each_channel_alone_answers_with_the_same_rows(stack: BackgroundStack) -> None:
    """Whatever a store's search reads (two-phase fetch, docs/retrieval.md),
    a hit carries exactly what the other store holds for the same chunk."""
    query = "restore from snapshots"
    vector = stack.retrieve(query, top_k=5, channels=[rpb.CHANNEL_VECTOR])
    lexical = stack.retrieve(query, top_k=5, channels=[rpb.CHANNEL_LEXICAL])
    assert vector.evidence.text and all(hit.text and hit.url for hit in vector.hits)

    def fields(hit: rpb.Hit) -> tuple[str, ...]:
        return (hit.doc_id, hit.url, hit.title, hit.heading_path, hit.text, hit.locale)

    whole = {hit.chunk_id: fields(hit) for hit in lexical.hits}
    shared = [hit for hit in vector.hits if hit.chunk_id in whole]
    assert shared, "the two channels share no hit for this query"
    assert all(fields(hit) == whole[hit.chunk_id] for hit in shared)


def test_over_long_query_is_invalid_argument(stack: BackgroundStack) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stack.retrieve("x" * 5000)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "1000" in (err.value.details() or "")


def test_forced_current_page_intent_ignores_the_wording(stack: BackgroundStack) -> None:
    reply = stack.retrieve(
        "how are rate limits enforced",
        page_url=url_of("billing.md"),
        intent=rpb.INTENT_CURRENT_PAGE,
    )
    assert reply.intent == rpb.INTENT_CURRENT_PAGE
    assert reply.hits and {h.url for h in reply.hits} == {url_of("billing.md")}
    missing = stack.retrieve(
        "anything", page_url="https://docs.example/nope", intent=rpb.INTENT_CURRENT_PAGE
    )
    assert missing.page_status == rpb.PAGE_STATUS_NOT_INDEXED and not missing.hits


def test_a_current_page_request_stays_within_the_callers_filter(stack: BackgroundStack) -> None:
    """The page is read where the filter allows it: a doc_ids or urls filter
    (a gateway's allow-list) was replaced by the page, so naming another page
    read it (probe)."""
    page = url_of("billing.md")
    inside = stack.retrieve(
        "summarize this page", page_url=page, filter=rpb.ScopeFilter(doc_ids=["billing.md"])
    )
    assert inside.page_status == rpb.PAGE_STATUS_INDEXED and inside.hits
    outside = stack.retrieve(
        "summarize this page", page_url=page, filter=rpb.ScopeFilter(doc_ids=["backups.md"])
    )
    assert outside.page_status == rpb.PAGE_STATUS_NOT_INDEXED and not outside.hits
    with pytest.raises(grpc.RpcError) as err:
        stack.retrieve(
            "summarize this page",
            page_url=page,
            filter=rpb.ScopeFilter(urls=[url_of("backups.md")]),
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "page_url: not among filter.urls" in (err.value.details() or "")


def test_forced_current_page_without_page_url_is_invalid(stack: BackgroundStack) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stack.retrieve("anything", intent=rpb.INTENT_CURRENT_PAGE)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "page_url" in (err.value.details() or "")


@pytest.mark.parametrize(
    "method", [rpb.FUSION_METHOD_RRF, rpb.FUSION_METHOD_MIN_MAX, rpb.FUSION_METHOD_DBSF]
)
def test_each_fusion_explains_every_fused_score(stack: BackgroundStack, method: int) -> None:
    reply = stack.retrieve(
        "restore from snapshots", top_k=5, disable_rerank=True, fusion=rpb.Fusion(method=method)
    )
    assert reply.hits and not reply.degraded
    for hit in reply.hits:  # the fused score is the sum of what each channel added
        assert hit.fused_score == pytest.approx(sum(m.contribution for m in hit.channels))
    scores = [hit.fused_score for hit in reply.hits]
    assert scores == sorted(scores, reverse=True)
    if method != rpb.FUSION_METHOD_RRF:  # each channel's best gets the channel's full weight
        assert max(m.contribution for h in reply.hits for m in h.channels) == pytest.approx(1.0)


def test_fusion_choices_out_of_bounds_are_refused_naming_the_field(stack: BackgroundStack) -> None:
    for fusion, expected in [
        (rpb.Fusion(method=rpb.FUSION_METHOD_DBSF, rrf_k=10), "fusion.rrf_k"),
        (rpb.Fusion(rrf_k=5000), "fusion.rrf_k"),
        (rpb.Fusion(rrf_k=float("nan")), "fusion.rrf_k"),
        (rpb.Fusion(method=9), "fusion.method"),
    ]:
        with pytest.raises(grpc.RpcError) as err:
            stack.retrieve("restore", fusion=fusion)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert expected in (err.value.details() or "")
    small_k = stack.retrieve("restore from snapshots", top_k=1, fusion=rpb.Fusion(rrf_k=1))
    assert small_k.hits[0].fused_score > 0.5 - 1e-9  # 1 / (1 + 1) from its best channel
