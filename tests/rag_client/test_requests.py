"""RetrieveRequest from keyword arguments: the scope keywords build the
filter, a prepared request passes through unchanged, and a wrong name or
type is a TypeError naming it (limits are the server's to check)."""

from __future__ import annotations

import pytest

from rag_client import retriever_pb2 as rpb
from rag_client import scope_filter
from rag_client.requests import retrieve_request

pytestmark = pytest.mark.unit


def test_keywords_become_the_request_fields() -> None:
    request = retrieve_request(
        "restore a backup",
        top_k=3,
        debug=True,
        group_by_document=True,
        channels=[rpb.CHANNEL_LEXICAL],
        weights=rpb.ChannelWeights(vector=0.5, lexical=2.0),
    )
    assert request == rpb.RetrieveRequest(
        query="restore a backup",
        top_k=3,
        debug=True,
        group_by_document=True,
        channels=[rpb.CHANNEL_LEXICAL],
        weights=rpb.ChannelWeights(vector=0.5, lexical=2.0),
    )
    assert not request.HasField("filter")


def test_scope_keywords_build_the_filter() -> None:
    request = retrieve_request(
        "q", scope_id="handbook", locale="en", doc_ids=["a.md"], metadata={"section": "ops"}
    )
    assert request.filter == rpb.ScopeFilter(
        scope_id="handbook", locale="en", doc_ids=["a.md"], metadata={"section": "ops"}
    )
    assert scope_filter() is None
    prepared = rpb.ScopeFilter(scope_id="x")
    assert retrieve_request("q", filter=prepared).filter == prepared
    with pytest.raises(TypeError, match="filter= or the scope keywords"):
        retrieve_request("q", filter=prepared, scope_id="y")


def test_a_prepared_request_passes_through_and_excludes_keywords() -> None:
    prepared = rpb.RetrieveRequest(query="q", top_k=2)
    assert retrieve_request(prepared) is prepared
    with pytest.raises(TypeError, match="not both"):
        retrieve_request(prepared, top_k=3)


def test_a_wrong_name_or_type_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="no field 'topk'"):
        retrieve_request("q", topk=3)
    with pytest.raises(TypeError, match="top_k"):
        retrieve_request("q", top_k="three")
    with pytest.raises(TypeError, match="query: expected a str"):
        retrieve_request(42)  # type: ignore[arg-type]


def test_several_scopes_and_a_page_token_are_fields_too() -> None:
    request = retrieve_request("q", scope_ids=["a", "b"], page_token="tok")
    assert list(request.filter.scope_ids) == ["a", "b"] and request.page_token == "tok"


@pytest.mark.parametrize(
    ("keywords", "field"),
    [
        ({"scope_ids": "docs"}, "scope_ids"),  # a str is iterable: d, o, c, s
        ({"doc_ids": "page-1"}, "doc_ids"),
        ({"scope_id": 5}, "scope_id"),
        ({"metadata": {1: 2}}, "metadata"),
        ({"doc_ids": [None]}, "doc_ids"),
    ],
)
def test_a_wrong_scope_keyword_is_a_type_error_naming_it(
    keywords: dict[str, object], field: str
) -> None:
    with pytest.raises(TypeError, match=f"ScopeFilter.{field}:"):
        retrieve_request("q", **keywords)  # type: ignore[arg-type]
