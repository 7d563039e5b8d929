"""JSON ↔ Retriever proto mapping and the input bounds."""

from __future__ import annotations

import grpc
import pytest

from gateway.errors import ApiError, ErrorCode, error_response
from gateway.mapping import to_retrieve_request, to_search_response
from gateway.retriever_client import api_error_for
from gateway.schema import SearchLimits, SearchRequest
from gateway.snippets import snippet
from rag_client import CallError
from rag_client.errors import error_for
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from tests.gateway.support import canned_response

pytestmark = pytest.mark.unit

LIMITS = SearchLimits(max_query_chars=20, max_top_k=10, max_filter_values=2)


def test_request_maps_scope_and_drops_the_fragment() -> None:
    request = SearchRequest.model_validate(
        {
            "query": "ports",
            "page_url": " https://docs.example/deployment#ports ",
            "scope": {"scope_id": "docs", "doc_ids": ["a"], "metadata": {"k": "v"}},
        }
    )
    proto = to_retrieve_request(request, "ports", top_k=4, debug=False)
    assert proto.page_url == "https://docs.example/deployment"
    assert (proto.top_k, proto.filter.scope_id, list(proto.filter.doc_ids)) == (4, "docs", ["a"])
    assert dict(proto.filter.metadata) == {"k": "v"}
    assert list(proto.filter.urls) == []


def test_request_forwards_the_query_language() -> None:
    request = SearchRequest.model_validate({"query": "分词", "query_language": "zh"})
    assert to_retrieve_request(request, "分词", top_k=3, debug=False).query_language == "zh"
    plain = SearchRequest.model_validate({"query": "x"})
    assert to_retrieve_request(plain, "x", top_k=3, debug=False).query_language == ""


def test_this_page_forces_the_current_page_intent() -> None:
    request = SearchRequest.model_validate(
        {
            "query": "q",
            "page_url": "https://x.example/p#top",
            "this_page": True,
            "scope": {"urls": ["https://x.example/other"]},
        }
    )
    proto = to_retrieve_request(request, "q", top_k=3, debug=False)
    assert proto.intent == pb.INTENT_CURRENT_PAGE
    assert proto.page_url == "https://x.example/p"


def test_response_uses_stable_lowercase_names_and_links_citations() -> None:
    reply = canned_response(pb.RetrieveRequest(query="status 429 retry", top_k=2, debug=True))
    body = to_search_response(reply, "rid", debug=True).model_dump(mode="json")
    assert body["intent"] == "site_search"
    assert body["page_status"] == "unspecified"
    assert body["hits"][0]["citation"] == body["citations"][0]["number"] == 1
    assert body["hits"][0]["channels"][0] == {
        "channel": "vector",
        "rank": 1,
        "score": 0.8,
        "contribution": 0.0,
    }
    assert body["debug"]["channels"][1]["status"] == "ok"
    assert body["timings_ms"] == {"fanout": 1.5, "rerank": 4.2}


def test_response_carries_highlights_on_text_and_snippet() -> None:
    text = "# Billing\n\nIf the **export** fails with code X7Q-4291, rotate the credentials."
    term, ident = text.index("export"), text.index("X7Q-4291")
    reply = pb.RetrieveResponse(
        query_language="en",
        hits=[
            pb.Hit(
                chunk_id="c",
                text=text,
                highlights=[
                    pb.Span(start=2, end=9),  # "Billing", in the heading: not in the snippet
                    pb.Span(start=term, end=term + 6),
                    pb.Span(start=ident, end=ident + 8, identifier=True),
                    pb.Span(start=ident, end=len(text) + 5),  # out of range: dropped
                ],
                exact_identifiers=["x7q-4291"],
            )
        ],
    )
    hit = to_search_response(reply, "rid", debug=False).model_dump(mode="json")["hits"][0]
    assert hit["snippet"] == "If the export fails with code X7Q-4291, rotate the credentials."
    assert hit["highlights"] == [
        {"start": 2, "end": 9, "identifier": False},
        {"start": term, "end": term + 6, "identifier": False},
        {"start": ident, "end": ident + 8, "identifier": True},
    ]
    excerpt = hit["snippet"]
    shown = [(excerpt[s["start"] : s["end"]], s["identifier"]) for s in hit["snippet_highlights"]]
    assert shown == [("export", False), ("X7Q-4291", True)]
    assert hit["exact_identifiers"] == ["x7q-4291"]
    assert to_search_response(reply, "rid", debug=False).query_language == "en"


def test_canned_hits_highlight_the_query_words_in_their_snippets() -> None:
    reply = canned_response(pb.RetrieveRequest(query="which port does the gateway use"))
    body = to_search_response(reply, "rid", debug=False).model_dump(mode="json")
    hit = body["hits"][0]
    words = [hit["snippet"][s["start"] : s["end"]].lower() for s in hit["snippet_highlights"]]
    assert "port" in words and set(words) <= {"which", "port", "does", "the", "gateway", "use"}
    assert body["query_language"] == "en"


def test_debug_report_is_left_out_unless_asked() -> None:
    reply = canned_response(pb.RetrieveRequest(query="status 429", debug=True))
    assert to_search_response(reply, "rid", debug=False).debug is None


def test_unknown_enum_numbers_read_as_unspecified() -> None:
    reply = pb.RetrieveResponse(intent=99)  # type: ignore[arg-type]
    assert to_search_response(reply, "rid", debug=False).intent == "unspecified"


def test_snippet_reads_as_plain_text_and_cuts_at_a_word() -> None:
    text = "# Title\n\n## Part\n\nSome **bold** text with [a link](https://x) and `code`.\n"
    assert snippet(text) == "Some bold text with a link and code."
    cut = snippet("word " * 100, limit=22)
    assert cut == "word word word word…"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"query": "a" * 21}, ErrorCode.QUERY_TOO_LONG),
        ({"query": " \t\n "}, ErrorCode.INVALID_REQUEST),
        ({"query": "q", "top_k": 0}, ErrorCode.TOP_K_OUT_OF_RANGE),
        ({"query": "q", "top_k": 11}, ErrorCode.TOP_K_OUT_OF_RANGE),
        ({"query": "q", "this_page": True}, ErrorCode.INVALID_REQUEST),
        ({"query": "q", "scope": {"doc_ids": ["a", "b", "c"]}}, ErrorCode.INVALID_REQUEST),
        ({"query": "..."}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_limits_refuse_out_of_bounds_requests(body: dict[str, object], code: ErrorCode) -> None:
    with pytest.raises(ApiError) as caught:
        LIMITS.check(SearchRequest.model_validate(body))
    assert caught.value.code is code


def test_limits_count_the_query_after_collapsing_whitespace() -> None:
    padded = SearchRequest.model_validate({"query": "  a" + " " * 50 + "b  ", "top_k": 10})
    assert LIMITS.check(padded) == "a b"


LANGUAGE_CODES = ["", "en", "zh", "ja", "ko", "yue", "zh-Hant", "pt-BR", "sr-Latn-RS"]


@pytest.mark.parametrize("code", LANGUAGE_CODES)
def test_limits_accept_language_codes(code: str) -> None:
    LIMITS.check(SearchRequest.model_validate({"query": "q", "query_language": code}))


def test_response_carries_each_hits_translations() -> None:
    translations = [
        pb.Translation(locale="en", url="https://docs.example/en/a", doc_id="en/a.md"),
        pb.Translation(locale="zh-CN", url="/zh-CN/a", doc_id="zh-CN/a.md"),
    ]
    reply = pb.RetrieveResponse(
        hits=[pb.Hit(chunk_id="c", text="x", translations=translations), pb.Hit(chunk_id="d")]
    )
    hits = to_search_response(reply, "rid", debug=False).model_dump(mode="json")["hits"]
    assert hits[0]["translations"] == [
        {"locale": "en", "url": "https://docs.example/en/a", "doc_id": "en/a.md"},
        {"locale": "zh-CN", "url": "/zh-CN/a", "doc_id": "zh-CN/a.md"},
    ]
    assert hits[1]["translations"] == []


def test_grouping_is_forwarded_and_each_hit_says_its_group() -> None:
    request = SearchRequest.model_validate({"query": "backups", "group_by_document": True})
    assert to_retrieve_request(request, "backups", top_k=3, debug=False).group_by_document
    plain = SearchRequest.model_validate({"query": "backups"})
    assert not to_retrieve_request(plain, "backups", top_k=3, debug=False).group_by_document
    reply = pb.RetrieveResponse(hits=[pb.Hit(chunk_id="a", group=1), pb.Hit(chunk_id="b")])
    hits = to_search_response(reply, "rid", debug=False).model_dump(mode="json")["hits"]
    assert [hit["group"] for hit in hits] == [1, None]  # None: not grouped
    with pytest.raises(ValueError, match="group_by_document"):
        SearchRequest.model_validate({"query": "q", "group_by_document": "yes"})


def test_paging_is_forwarded_both_ways() -> None:
    request = SearchRequest.model_validate({"query": "backups", "page_token": "AQAB"})
    assert to_retrieve_request(request, "backups", top_k=3, debug=False).page_token == "AQAB"
    reply = pb.RetrieveResponse(hits=[pb.Hit(chunk_id="a")], next_page_token="AQAC")
    assert to_search_response(reply, "rid", debug=False).next_page_token == "AQAC"
    with pytest.raises(ValueError, match="page_token"):
        SearchRequest.model_validate({"query": "q", "page_token": "x" * 2049})


def _refusal(code: grpc.StatusCode, details: str) -> CallError:
    """A Retriever refusal as the Retriever's client (rag_client) raises it
    (built here: only its code and details matter to the mapping)."""
    return error_for(code, details, method="Retriever/Retrieve")


def test_an_expired_page_token_is_a_409_that_says_start_again() -> None:
    expired = api_error_for(
        _refusal(grpc.StatusCode.FAILED_PRECONDITION, "page_token: issued for generation 3")
    )
    assert (expired.code, expired.status) == (ErrorCode.PAGE_EXPIRED, 409)
    other = api_error_for(_refusal(grpc.StatusCode.FAILED_PRECONDITION, "index not ready"))
    assert other.code is ErrorCode.UPSTREAM_REJECTED


def test_a_bad_page_token_is_a_400_with_its_own_code_and_the_retrievers_reason() -> None:
    reason = "page_token: origin 4611686018427387904 is outside 946684800..7258118400"
    refused = api_error_for(_refusal(grpc.StatusCode.INVALID_ARGUMENT, reason))
    assert (refused.code, refused.status, refused.message) == (
        ErrorCode.INVALID_PAGE_TOKEN,
        400,
        reason,
    )
    other = api_error_for(_refusal(grpc.StatusCode.INVALID_ARGUMENT, "top_k: 0"))
    assert other.code is ErrorCode.UPSTREAM_REJECTED


def test_several_scopes_are_forwarded_and_bounded() -> None:
    request = SearchRequest.model_validate({"query": "q", "scope": {"scope_ids": ["a", "b"]}})
    assert list(to_retrieve_request(request, "q", top_k=3, debug=False).filter.scope_ids) == [
        "a",
        "b",
    ]
    many = SearchRequest.model_validate({"query": "q", "scope": {"scope_ids": ["a", "b", "c"]}})
    with pytest.raises(ApiError, match="at most 2"):
        LIMITS.check(many)


def test_fusion_choice_is_forwarded_and_bounded() -> None:
    request = SearchRequest.model_validate({"query": "q", "fusion": {"method": "dbsf"}})
    sent = to_retrieve_request(request, "q", top_k=3, debug=False)
    assert (sent.fusion.method, sent.fusion.rrf_k) == (pb.FUSION_METHOD_DBSF, 0.0)
    rrf = SearchRequest.model_validate({"query": "q", "fusion": {"method": "rrf", "rrf_k": 20}})
    assert to_retrieve_request(rrf, "q", top_k=3, debug=False).fusion.rrf_k == 20
    plain = to_retrieve_request(SearchRequest.model_validate({"query": "q"}), "q", 3, False)
    assert plain.fusion.method == pb.FUSION_METHOD_UNSPECIFIED
    for bad in ({"method": "sum"}, {"rrf_k": -1}, {"rrf_k": 1001}, {"weights": 1}):
        with pytest.raises(ValueError, match="fusion"):
            SearchRequest.model_validate({"query": "q", "fusion": bad})


def test_boosts_are_forwarded_and_each_hit_says_its_boost() -> None:
    body = {
        "query": "q",
        "boosts": {
            "recency": {"weight": 2, "scale_days": 90, "function": "gauss"},
            "metadata": [{"key": "product", "value": "api", "weight": 0.5}],
        },
    }
    sent = to_retrieve_request(SearchRequest.model_validate(body), "q", 3, False).boosts
    assert (sent.recency.weight, sent.recency.scale_days) == (2, 90)
    assert sent.recency.function == pb.DECAY_FUNCTION_GAUSS and sent.recency.decay == 0.5
    assert [(m.key, m.value, m.weight) for m in sent.metadata] == [("product", "api", 0.5)]
    plain = to_retrieve_request(SearchRequest.model_validate({"query": "q"}), "q", 3, False)
    assert not plain.boosts.HasField("recency") and not plain.boosts.metadata
    reply = pb.RetrieveResponse(hits=[pb.Hit(chunk_id="a", boost=1.5, boost_reasons=["x +0.5"])])
    hit = to_search_response(reply, "rid", debug=False).hits[0]
    assert (hit.boost, hit.boost_reasons) == (1.5, ["x +0.5"])
    with pytest.raises(ValueError, match="boosts"):
        SearchRequest.model_validate({"query": "q", "boosts": {"recency": {"weight": 1}}})


def test_diversity_is_forwarded_and_bounded() -> None:
    body = {"query": "q", "diversity": {"mmr_lambda": 0.6, "window": 30}}
    sent = to_retrieve_request(SearchRequest.model_validate(body), "q", 3, False).diversity
    assert (sent.mmr_lambda, sent.window) == (0.6, 30)
    for bad in ({"mmr_lambda": 1.5}, {"window": 201}, {"lambda": 0.5}):
        with pytest.raises(ValueError, match="diversity"):
            SearchRequest.model_validate({"query": "q", "diversity": bad})


def test_an_unreachable_retriever_is_a_502_that_says_when_to_retry() -> None:
    unreachable = api_error_for(_refusal(grpc.StatusCode.UNAVAILABLE, "connection refused"))
    assert (unreachable.code, unreachable.status) == (ErrorCode.UPSTREAM_UNAVAILABLE, 502)
    assert unreachable.retry_after_s == 1
    assert (
        "Retry-After" not in error_response(ApiError(ErrorCode.UPSTREAM_UNAVAILABLE, "x")).headers
    )
    assert error_response(unreachable).headers["Retry-After"] == "1"
    broken = api_error_for(_refusal(grpc.StatusCode.INTERNAL, "boom"))
    assert (broken.status, broken.retry_after_s) == (502, None)  # nothing says waiting helps


def test_a_refusal_that_names_the_gateways_credential_is_told_without_it() -> None:
    """The Retriever tells its caller (the gateway) which scopes it may read;
    the public gets what to change, not the gateway's name or scope list."""
    reason = (
        "filter.scope_id: required, caller 'gateway' may read several scopes "
        "(docs, internal-wiki); name one, or several in filter.scope_ids"
    )
    refused = api_error_for(_refusal(grpc.StatusCode.INVALID_ARGUMENT, reason))
    assert (refused.code, refused.status) == (ErrorCode.UPSTREAM_REJECTED, 400)
    assert refused.message.startswith("scope.scope_id: required")
    for secret in ("gateway", "internal-wiki", "docs"):
        assert secret not in refused.message
    other = api_error_for(_refusal(grpc.StatusCode.INVALID_ARGUMENT, "x: caller 'gateway' ..."))
    assert "gateway" not in other.message
