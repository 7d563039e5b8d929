"""Paging through one fused ranking (services.retriever.paging): the token
alone, then through a real stack (real model, real stores, a real Reranker
with a tiny cross-encoder) on rank: pages joined equal one long answer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.core.errors import FailedPrecondition, InvalidArgument, Unavailable
from services.embedding.embedder import Embedder
from services.retriever.fusion import RerankBlend, merge_rerank, place_reranked
from services.retriever.page_keys import PageTokenKeys
from services.retriever.paging import (
    MAX_TOKEN_CHARS,
    PageCursor,
    PageToken,
    decode_token,
    ranking_fingerprint,
    request_fingerprint,
    reranked_positions,
)
from services.retriever.requests import RetrievalRequest
from services.retriever.types import FusedHit
from tests.retriever.factories import hit
from tests.retriever.test_rerank_service import start_with_reranker
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundStack
from tests.support.tiny_cross_encoder import build_tiny_cross_encoder

REQUEST = RetrievalRequest(query="how do I restore a backup", top_k=3)
KEYS = PageTokenKeys(b"k" * 32)


def _hits(*ids: str) -> list[FusedHit]:
    return [hit(chunk_id, 1.0 / i, doc_id=chunk_id[0]) for i, chunk_id in enumerate(ids, 1)]


def _token(**fields: object) -> PageToken:
    base = PageToken(7, request_fingerprint(REQUEST), b"\0" * 8, 3, ((2, 1.5), (0, 0.25)))
    return replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.unit
@given(
    generation=st.none() | st.integers(0, 2**40),
    offset=st.integers(1, 10_000),
    reranked=st.lists(
        st.tuples(st.integers(0, 400), st.sampled_from([0.5, -2.0, 8.25])),
        unique_by=lambda entry: entry[0],
        max_size=240,
    ),
)
def test_a_token_reads_back_as_written(
    generation: int | None, offset: int, reranked: list[tuple[int, float]]
) -> None:
    token = _token(generation=generation, offset=offset, reranked=tuple(reranked))
    text = token.encode(KEYS)
    assert text.isascii() and "=" not in text and "/" not in text
    assert decode_token(text, KEYS) == token


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    [
        "x",
        "not a token!",
        "AAAA",
        _token().encode(KEYS)[:-3],
        _token().encode(KEYS) + "=",
        _token().encode(PageTokenKeys(b"o" * 32)),  # another deployment's key
        "A" * (MAX_TOKEN_CHARS + 1),
    ],
)
def test_a_token_we_did_not_issue_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidArgument, match="page_token"):
        decode_token(text, KEYS)


@pytest.mark.unit
def test_a_token_continues_only_its_own_request() -> None:
    token = _token().encode(KEYS)
    resized = replace(REQUEST, top_k=10, debug=True, context_char_budget=500, page_token=token)
    assert PageCursor.of(resized, KEYS).offset == 3
    for other in (
        replace(REQUEST, query="how do I delete a backup"),
        replace(REQUEST, max_chunks_per_document=1),
        replace(REQUEST, rerank=False),
        replace(REQUEST, group_by_document=True),
    ):
        with pytest.raises(InvalidArgument, match="different request"):
            PageCursor.of(replace(other, page_token=token), KEYS)
    assert PageCursor.of(REQUEST, KEYS).token is None


@pytest.mark.unit
def test_a_commit_that_touched_no_candidate_keeps_the_token_valid() -> None:
    fused = _hits("a1", "b1", "c1")
    cursor = PageCursor(_token(generation=7, ranking=ranking_fingerprint(fused), reranked=()))
    # Served from generation 9 now: another scope's runs committed 8 and 9.
    assert [h.chunk.chunk_id for h in cursor.restore(fused, [], 9)] == ["a1", "b1", "c1"]


@pytest.mark.unit
def test_a_candidate_rewritten_since_the_first_page_refuses_the_token() -> None:
    fused = _hits("a1", "b1", "c1")
    cursor = PageCursor(_token(generation=7, ranking=ranking_fingerprint(fused), reranked=()))
    # b1's text was edited by run 8: same id (a position), a newer row.
    edited = [*fused[:1], replace(fused[1], chunk=replace(fused[1].chunk, generation=8)), fused[2]]
    with pytest.raises(FailedPrecondition, match="generation 7, now serving 8"):
        cursor.restore(edited, [], 8)
    with pytest.raises(FailedPrecondition, match="changed since the first page; start again"):
        cursor.restore(list(reversed(fused)), [], 7)


@pytest.mark.unit
def test_a_later_page_restores_the_first_pages_rerank_order() -> None:
    fused = _hits("a1", "b1", "c1", "d1", "e1")
    first = merge_rerank(fused, [0.1, 0.9, 0.5])  # scored prefix: b1, c1, a1
    entries = reranked_positions(fused, first)
    cursor = PageCursor(_token(ranking=ranking_fingerprint(fused), reranked=entries))
    restored = cursor.restore(fused, degraded=[])
    assert [h.chunk.chunk_id for h in restored] == [h.chunk.chunk_id for h in first]
    assert [h.rerank_score for h in restored[:3]] == [0.9, 0.5, pytest.approx(0.1)]


@pytest.mark.unit
def test_a_later_page_restores_a_rerank_that_skipped_some_candidates() -> None:
    """Candidates the reranker could not read (another language, or past its
    deadline) keep their fused places on the first page; later pages must
    restore exactly that order, not move the scored hits to the front."""
    fused = _hits("a1", "b1", "c1", "d1", "e1")
    first = place_reranked(fused, {0: 0.1, 2: 0.9, 4: 0.5}, RerankBlend(0.0, 1.0, 10.0))
    assert [h.chunk.chunk_id for h in first] == ["c1", "b1", "e1", "d1", "a1"]
    entries = reranked_positions(fused, first)
    cursor = PageCursor(_token(ranking=ranking_fingerprint(fused), reranked=entries))
    restored = cursor.restore(fused, degraded=[])
    assert [h.chunk.chunk_id for h in restored] == [h.chunk.chunk_id for h in first]
    assert [h.rerank_score for h in restored] == [h.rerank_score for h in first]


@pytest.mark.unit
def test_a_different_candidate_list_is_refused_not_paged() -> None:
    fused = _hits("a1", "b1", "c1")
    cursor = PageCursor(_token(ranking=ranking_fingerprint(fused), reranked=()))
    with pytest.raises(FailedPrecondition, match="ranking changed"):
        cursor.restore(_hits("a1", "c1", "b1"), degraded=[])
    with pytest.raises(Unavailable, match="vector"):
        cursor.restore(_hits("a1", "b1"), degraded=["vector"])


# ---------------------------------------------------------------- real stack

QUERY = "what should clients do after status 429"


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    root: Path = tmp_path_factory.mktemp("paging")
    model = build_tiny_cross_encoder(root / "model")
    stack, _ = start_with_reranker(root, embedder, str(model))
    yield stack
    stack.stop()


def _all_pages(stack: BackgroundStack, size: int, **fields: Any) -> list[rpb.RetrieveResponse]:
    pages = [stack.retrieve(QUERY, top_k=size, **fields)]
    while pages[-1].next_page_token and len(pages) < 50:
        token = pages[-1].next_page_token
        pages.append(stack.retrieve(QUERY, top_k=size, page_token=token, **fields))
    return pages


@pytest.mark.integration
def test_pages_joined_are_the_one_reranked_ranking(stack: BackgroundStack) -> None:
    whole = stack.retrieve(QUERY, top_k=50, max_chunks_per_document=3)
    assert whole.rerank.used and not whole.next_page_token
    pages = _all_pages(stack, 4, max_chunks_per_document=3)
    joined = [h for page in pages for h in page.hits]
    assert len(pages) > 2 and not pages[-1].next_page_token
    assert [h.chunk_id for h in joined] == [h.chunk_id for h in whole.hits]  # no dup, no gap
    assert [h.rank for h in joined] == list(range(1, len(joined) + 1))
    # Later pages keep the first page's rerank order without asking again.
    assert [h.reranked for h in joined] == [h.reranked for h in whole.hits]
    assert pages[1].rerank.reason.startswith("the first page's order")


@pytest.mark.integration
def test_grouped_pages_continue_the_documents(stack: BackgroundStack) -> None:
    whole = stack.retrieve(QUERY, top_k=50, group_by_document=True, disable_rerank=True)
    pages = _all_pages(stack, 2, group_by_document=True, disable_rerank=True)
    joined = [(h.chunk_id, h.group) for page in pages for h in page.hits]
    assert joined == [(h.chunk_id, h.group) for h in whole.hits]
    assert max(g for _, g in joined) > 2


@pytest.mark.integration
def test_a_token_for_another_question_or_index_is_refused(stack: BackgroundStack) -> None:
    first = stack.retrieve(QUERY, top_k=2)
    token = first.next_page_token
    with pytest.raises(grpc.RpcError) as caught:
        stack.retrieve("how do I restore a backup", top_k=2, page_token=token)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "page_token" in str(caught.value.details())
    with pytest.raises(grpc.RpcError) as caught:
        stack.retrieve(QUERY, top_k=2, page_token="garbage!")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The first hit's page edited: a candidate of this ranking is rewritten.
    edited = next(d for d in corpus_documents() if d.doc_id == first.hits[0].doc_id)
    edited.text += "\n\nOne more paragraph, so the index moves to a new generation."
    assert stack.upsert([edited]).counts.changed == 1
    with pytest.raises(grpc.RpcError) as caught:
        stack.retrieve(QUERY, top_k=2, page_token=token)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "generation" in str(caught.value.details())


@pytest.mark.integration
def test_another_scopes_run_leaves_the_pages_of_a_scope_valid(stack: BackgroundStack) -> None:
    """A multi-tenant index commits whenever any tenant ingests: a reader's
    next page stays valid unless its own candidates changed."""
    scoped: dict[str, Any] = {
        "filter": rpb.ScopeFilter(scope_id="handbook"),
        "disable_rerank": True,
    }
    whole = stack.retrieve(QUERY, top_k=50, **scoped)
    first = stack.retrieve(QUERY, top_k=3, **scoped)
    everywhere = stack.retrieve(QUERY, top_k=3, disable_rerank=True)
    other = corpus_documents(scope_id="other-tenant")[0]
    other.doc_id, other.url = f"other-{other.doc_id}", f"{other.url}-other"  # ids are global
    assert stack.upsert([other]).counts.added == 1
    pages = [first]
    while pages[-1].next_page_token:
        token = pages[-1].next_page_token
        pages.append(stack.retrieve(QUERY, top_k=3, page_token=token, **scoped))
    joined = [h.chunk_id for page in pages for h in page.hits]
    assert joined == [h.chunk_id for h in whole.hits]
    # Unscoped, the other tenant's page is among the candidates: that ranking changed.
    with pytest.raises(grpc.RpcError) as caught:
        stack.retrieve(QUERY, top_k=3, disable_rerank=True, page_token=everywhere.next_page_token)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION


@pytest.mark.unit
@given(st.text(max_size=300) | st.binary(max_size=200).map(lambda b: _b64(b)))
def test_any_text_as_a_token_is_a_token_or_invalid_argument(text: str) -> None:
    try:
        token = decode_token(text, KEYS)
    except InvalidArgument as refused:
        assert str(refused).startswith("page_token:")
        return
    cursor = PageCursor(token)
    fused = [hit(f"c{i}") for i in range(3)]
    try:
        cursor.restore(fused, degraded=[])
    except (InvalidArgument, FailedPrecondition) as refused:
        assert str(refused).startswith("page_token:")


def _b64(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
