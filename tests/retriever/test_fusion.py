"""RRF fusion, weights, per-document caps, the vector floor and rerank merging."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.core.analysis.query_shape import query_shape
from services.core.errors import ConfigError, InvalidArgument
from services.core.models import ScoredChunk
from services.retriever.app import retrieval_config
from services.retriever.candidates import channel_weights, without_second_voice_for_keywords
from services.retriever.fusion import (
    RrfFuser,
    cap_per_document,
    drop_weak_vector_only,
    merge_rerank,
    validate_weights,
)
from services.retriever.request_proto import request_weights
from services.retriever.requests import RetrievalConfig
from services.retriever.settings import RetrieverSettings
from services.retriever.types import Channel, ChannelRank, FusedHit
from tests.retriever.factories import chunk, hit, ranked_list, scored

pytestmark = pytest.mark.unit

V, L = Channel.VECTOR, Channel.LEXICAL


def exactly(expected: object) -> object:
    """Equal up to float rounding of the sum (absolute 1e-12)."""
    return pytest.approx(expected, rel=0, abs=1e-12)


def ids(hits: list[FusedHit]) -> list[str]:
    return [h.chunk.chunk_id for h in hits]


def scores_by_id(hits: list[FusedHit]) -> dict[str, float]:
    return {h.chunk.chunk_id: h.fused_score for h in hits}


# --- RRF scores -------------------------------------------------------------


def test_hand_computed_rrf_scores_and_order() -> None:
    hits = RrfFuser().fuse({V: ranked_list("x", "y", "z"), L: ranked_list("z", "x")})
    assert ids(hits) == ["x", "z", "y"]
    got = scores_by_id(hits)
    assert got["x"] == exactly(1 / 61 + 1 / 62)
    assert got["z"] == exactly(1 / 63 + 1 / 61)
    assert got["y"] == exactly(1 / 62)


def test_records_rank_and_own_score_per_channel() -> None:
    vector = [scored("x", 0.91), scored("y", 0.80)]
    lexical = [scored("y", 12.5)]
    by_id = {h.chunk.chunk_id: h for h in RrfFuser().fuse({L: lexical, V: vector})}
    assert by_id["x"].channels == [ChannelRank(V, 1, 0.91, 1 / 61)]
    assert by_id["y"].channels == [ChannelRank(V, 2, 0.80, 1 / 62), ChannelRank(L, 1, 12.5, 1 / 61)]
    assert by_id["y"].rank_in(L) == ChannelRank(L, 1, 12.5, 1 / 61)
    # The contributions are what the fused score is the sum of.
    assert by_id["y"].fused_score == sum(c.contribution for c in by_id["y"].channels)
    assert by_id["x"].rank_in(L) is None


def test_weights_scale_each_list_and_can_change_the_winner() -> None:
    hits = RrfFuser().fuse(
        {V: ranked_list("x", "y", "z"), L: ranked_list("z", "x")}, weights={V: 0.5, L: 2.0}
    )
    got = scores_by_id(hits)
    assert got["x"] == exactly(0.5 / 61 + 2 / 62)
    assert got["y"] == exactly(0.5 / 62)
    assert got["z"] == exactly(0.5 / 63 + 2 / 61)
    assert ids(hits) == ["z", "x", "y"]


def test_missing_weight_defaults_to_one_and_k_is_configurable() -> None:
    hits = RrfFuser(k=0).fuse({V: ranked_list("a", "b"), L: ranked_list("b")}, weights={V: 3.0})
    assert scores_by_id(hits) == exactly({"a": 3.0, "b": 3 / 2 + 1.0})


def test_zero_weight_channel_keeps_provenance_but_adds_nothing() -> None:
    hits = RrfFuser().fuse({V: ranked_list("a"), L: ranked_list("b")}, weights={V: 0.0})
    assert ids(hits) == ["b", "a"]
    assert hits[1].fused_score == 0.0
    assert hits[1].channels == [ChannelRank(V, 1, 1.0)]


def test_duplicate_in_one_list_keeps_first_rank_only() -> None:
    hits = RrfFuser().fuse({V: ranked_list("x", "y", "x")})
    assert scores_by_id(hits) == exactly({"x": 1 / 61, "y": 1 / 62})
    assert hits[0].channels == [ChannelRank(V, 1, 3.0, 1 / 61)]


def test_whole_row_wins_over_a_first_phase_row() -> None:
    compact = dataclasses.replace(chunk("x"), text="", partial=True)
    full = chunk("x", text="the full chunk text")
    hits = RrfFuser().fuse({V: [ScoredChunk(compact, 0.9)], L: [ScoredChunk(full, 7.0)]})
    assert hits[0].chunk.text == "the full chunk text"


def test_empty_inputs() -> None:
    assert RrfFuser().fuse({}) == []
    assert RrfFuser().fuse({V: [], L: []}) == []


def test_rejects_bad_k() -> None:
    with pytest.raises(ConfigError, match="got -1"):
        RrfFuser(k=-1)


# --- tie-break ----------------------------------------------------------------


def test_equal_scores_break_by_chunk_id_whatever_the_channel() -> None:
    hits = RrfFuser().fuse({V: ranked_list("b"), L: ranked_list("a")})
    assert hits[0].fused_score == hits[1].fused_score
    assert ids(hits) == ["a", "b"]


def test_equal_scores_prefer_more_channels() -> None:
    # k=0: "solo" scores 1/1 from one list, "both" 1/2 + 1/2 from two.
    hits = RrfFuser(k=0).fuse({V: ranked_list("solo", "both"), L: ranked_list("zz", "both")})
    by_id = scores_by_id(hits)
    assert by_id["solo"] == by_id["both"] == 1.0
    assert ids(hits)[:2] == ["both", "solo"]


def test_equal_scores_and_channel_count_prefer_best_single_rank() -> None:
    # k=0: "early" = 1/3 + 1/6 and "even" = 1/4 + 1/4, both exactly 0.5.
    vector = ranked_list("v1", "v2", "early", "even")
    lexical = ranked_list("l1", "l2", "l3", "even", "l5", "early")
    hits = RrfFuser(k=0).fuse({V: vector, L: lexical})
    by_id = scores_by_id(hits)
    assert by_id["early"] == by_id["even"] == 0.5
    order = ids(hits)
    assert order.index("early") < order.index("even")


chunk_ids = st.sampled_from([f"c{i}" for i in range(8)])
channel_lists = st.lists(chunk_ids, max_size=8).map(lambda cs: ranked_list(*cs))


@settings(deadline=None)  # never fail on a slow, shared CI machine
@given(vector=channel_lists, lexical=channel_lists, w_v=st.floats(0.1, 10), w_l=st.floats(0.1, 10))
def test_fusion_is_independent_of_dict_order(
    vector: list[ScoredChunk], lexical: list[ScoredChunk], w_v: float, w_l: float
) -> None:
    fuser = RrfFuser()
    one = fuser.fuse({V: vector, L: lexical}, weights={V: w_v, L: w_l})
    other = fuser.fuse({L: lexical, V: vector}, weights={L: w_l, V: w_v})
    assert one == other  # exact: same floats, same order, same provenance


@settings(deadline=None)  # never fail on a slow, shared CI machine
@given(vector=channel_lists, lexical=channel_lists)
def test_scores_match_the_formula_and_come_best_first(
    vector: list[ScoredChunk], lexical: list[ScoredChunk]
) -> None:
    hits = RrfFuser().fuse({V: vector, L: lexical})
    for fused in hits:
        expected = math.fsum(1 / (60 + c.rank) for c in fused.channels)
        assert fused.fused_score == exactly(expected)
    assert [h.fused_score for h in hits] == sorted((h.fused_score for h in hits), reverse=True)
    assert len(set(ids(hits))) == len(hits) == len({s.chunk.chunk_id for s in vector + lexical})


# --- weights --------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-0.5, 10.5, math.nan, math.inf])
def test_validate_weights_names_the_bad_value(bad: float) -> None:
    with pytest.raises(InvalidArgument, match=rf"^weights\.lexical: {re.escape(repr(bad))} is "):
        validate_weights({V: 1.0, L: bad})


def test_validate_weights_rejects_all_zero_and_accepts_bounds() -> None:
    with pytest.raises(InvalidArgument, match="not all be 0"):
        validate_weights({V: 0.0, L: 0.0})
    assert validate_weights({V: 0.0, L: 10.0}) == {V: 0.0, L: 10.0}


def test_fuse_rejects_bad_weights() -> None:
    with pytest.raises(InvalidArgument, match="vector"):
        RrfFuser().fuse({V: ranked_list("a")}, weights={V: -1.0})
    with pytest.raises(InvalidArgument, match=r"^weights\.vector: -1\.0 is outside 0\.\.10$"):
        RrfFuser().fuse({V: ranked_list("a")}, weights={V: -1.0})
    with pytest.raises(InvalidArgument, match="not all be 0"):
        RrfFuser().fuse({V: ranked_list("a")}, weights={V: 0.0, L: 0.0})


def test_request_zeros_mean_the_configured_defaults() -> None:
    assert request_weights(pb.ChannelWeights()) is None
    assert request_weights(pb.ChannelWeights(vector=2.5)) == {V: 2.5}
    config = RetrievalConfig(vector_weight=1.6, lexical_weight=0.8)
    assert channel_weights(config, None) == {V: 1.6, L: 0.8, Channel.CROSS_LINGUAL: 1.0}
    assert channel_weights(config, {L: 3.0}) == {V: 1.6, L: 3.0, Channel.CROSS_LINGUAL: 1.0}


def test_the_second_vector_counts_for_questions_only_while_the_first_model_reads() -> None:
    config = RetrievalConfig()
    weights = {V: 1.0, L: 1.0, Channel.CROSS_LINGUAL: 1.0}
    question = query_shape("how do I turn a callback function into a promise")
    keywords = query_shape("promisify callback")
    X = Channel.CROSS_LINGUAL
    assert without_second_voice_for_keywords(weights, config, None, question)[X] == 1.0
    assert without_second_voice_for_keywords(weights, config, None, keywords)[X] == 0.0
    asked = {X: 2.0}
    assert without_second_voice_for_keywords(weights | asked, config, asked, keywords)[X] == 2.0
    # The first model does not read the query's language: the second list is its only meaning.
    unread = {V: 0.0, L: 1.0, X: 1.0}
    assert without_second_voice_for_keywords(unread, config, None, keywords)[X] == 1.0


def test_the_weight_settings_reach_the_fusion_config() -> None:
    settings = RetrieverSettings(vector_weight=2.5, lexical_weight=0.5)
    config = retrieval_config(settings)
    assert channel_weights(config, None)[V] == 2.5 and channel_weights(config, None)[L] == 0.5
    with pytest.raises(ValidationError, match="vector_weight"):
        RetrieverSettings(vector_weight=0)


@pytest.mark.parametrize("bad", [-1.0, 11.0, math.nan])
def test_request_weights_out_of_range_are_rejected_not_defaulted(bad: float) -> None:
    with pytest.raises(InvalidArgument, match="vector"):
        request_weights(pb.ChannelWeights(vector=bad))


def test_the_configured_vector_weight_decides_between_two_channel_heads() -> None:
    """A page only the vector channel found at rank 1 against one only the
    lexical channel found at rank 1: equal weights fall to the tie-break
    (vector first), a heavier lexical weight puts its head first."""
    lists = {V: ranked_list("v1", "both"), L: ranked_list("l1", "both")}
    heavier_lexical = channel_weights(RetrievalConfig(lexical_weight=1.2), None)
    assert ids(RrfFuser(k=60).fuse(lists, heavier_lexical))[:2] == ["both", "l1"]
    heavier_vector = channel_weights(RetrievalConfig(vector_weight=1.2), None)
    assert ids(RrfFuser(k=60).fuse(lists, heavier_vector))[:2] == ["both", "v1"]


# --- per-document cap -------------------------------------------------------------


def test_cap_keeps_order_and_best_chunks_per_document() -> None:
    hits = [hit(f"c{i}", doc_id=doc) for i, doc in enumerate("AABACBAC")]
    capped = cap_per_document(hits, 2)
    assert ids(capped) == ["c0", "c1", "c2", "c4", "c5", "c7"]


def test_the_cap_counts_a_page_per_scope_and_its_locales_as_one() -> None:
    """Two scopes may each hold `index.html` (the Indexer keys a document by
    doc_id and locale): a request over both kept one of them (probe). In one
    scope, one doc_id in two locales is one page in two languages."""
    first = hit("a", doc_id="index.html")
    other_scope = replace(first, chunk=replace(first.chunk, chunk_id="b", scope_id="zh-site"))
    other_locale = replace(first, chunk=replace(first.chunk, chunk_id="c", locale="zh-CN"))
    assert ids(cap_per_document([first, other_scope, other_locale], 1)) == ["a", "b"]


def test_cap_rejects_nonpositive() -> None:
    with pytest.raises(InvalidArgument, match="got 0"):
        cap_per_document([], 0)


@settings(deadline=None)  # never fail on a slow, shared CI machine
@given(docs=st.lists(st.sampled_from("ABCD"), max_size=20), cap=st.integers(1, 4))
def test_cap_invariants(docs: list[str], cap: int) -> None:
    hits = [hit(f"c{i}", doc_id=doc) for i, doc in enumerate(docs)]
    capped = cap_per_document(hits, cap)
    positions = [hits.index(h) for h in capped]
    assert positions == sorted(positions)  # a subsequence, order kept
    for doc in set(docs):
        kept = [h for h in capped if h.chunk.doc_id == doc]
        assert kept == [h for h in hits if h.chunk.doc_id == doc][:cap]


# --- vector-only floor ---------------------------------------------------------------


def test_floor_drops_only_weak_vector_only_hits() -> None:
    hits = [
        hit("weak_vector_only", vector=(1, 0.20)),
        hit("at_floor", vector=(2, 0.40)),
        hit("strong_vector_only", vector=(3, 0.75)),
        hit("lexical_only", lexical=(1, 3.2)),
        hit("weak_vector_but_lexical", vector=(4, 0.05), lexical=(2, 1.1)),
    ]
    kept = drop_weak_vector_only(hits, min_cosine=0.40)
    assert ids(kept) == [
        "at_floor",
        "strong_vector_only",
        "lexical_only",
        "weak_vector_but_lexical",
    ]


def test_floor_zero_is_off() -> None:
    hits = [hit("a", vector=(1, -0.3)), hit("b", vector=(2, 0.0))]
    assert drop_weak_vector_only(hits, 0.0) == hits


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_floor_out_of_range_is_rejected(bad: float) -> None:
    with pytest.raises(InvalidArgument, match="minimum vector score"):
        drop_weak_vector_only([], bad)


# --- rerank merge ------------------------------------------------------------------


def test_merge_rerank_orders_scored_prefix_and_keeps_rest_in_fused_order() -> None:
    hits = [hit(f"h{i}", 1 / (60 + i)) for i in range(1, 6)]
    merged = merge_rerank(hits, [0.1, 0.9, 0.5])
    assert ids(merged) == ["h2", "h3", "h1", "h4", "h5"]
    assert [h.rerank_score for h in merged] == [0.9, 0.5, 0.1, None, None]
    assert [h.reranked for h in merged] == [True, True, True, False, False]
    assert all(h.rerank_score is None for h in hits)  # inputs untouched


def test_merge_rerank_equal_scores_keep_fused_order() -> None:
    hits = [hit("a"), hit("b"), hit("c")]
    assert ids(merge_rerank(hits, [0.5, 0.5, 0.9])) == ["c", "a", "b"]


def test_merge_rerank_keeps_scored_prefix_ahead_of_unscored_hits() -> None:
    # A scored hit stays ahead of every unscored one, even with a negative logit.
    hits = [hit("a"), hit("b"), hit("c")]
    assert ids(merge_rerank(hits, [-7.0])) == ["a", "b", "c"]
    assert merge_rerank(hits, [-7.0])[0].rerank_score == -7.0


def test_merge_rerank_without_scores_is_fused_order() -> None:
    hits = [hit("a"), hit("b")]
    assert merge_rerank(hits, []) == hits


def test_merge_rerank_rejects_mismatched_or_non_finite_scores() -> None:
    with pytest.raises(ValueError, match="3 rerank scores for only 2 hits"):
        merge_rerank([hit("a"), hit("b")], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite"):
        merge_rerank([hit("a")], [math.nan])


def test_a_question_gets_the_question_weight_and_remembered_words_do_not() -> None:
    config = RetrievalConfig(vector_weight=1.0, question_vector_weight=3.0, question_min_words=4)
    question = query_shape("how do I turn a callback function into a promise")
    remembered = query_shape("promisify callback")
    assert channel_weights(config, None, question)[V] == 3.0
    assert channel_weights(config, None, remembered)[V] == 1.0
    # A request's own vector weight still wins over either.
    assert channel_weights(config, {V: 0.5}, question)[V] == 0.5


def test_the_question_weight_decides_a_head_to_head_only_for_a_question() -> None:
    """Both channels found x; the lexical channel's next page is l1, the vector
    channel's is v2. A few remembered words keep the lexical channel's page
    second; a question lets the vector channel's overtake it."""
    lists = {L: ranked_list("l1", "x"), V: ranked_list("x", "v2")}
    config = RetrievalConfig(question_vector_weight=3.0)
    words = channel_weights(config, None, query_shape("heap limit"))
    question = channel_weights(config, None, query_shape("where is the limit of the heap set"))
    assert ids(RrfFuser(k=60).fuse(lists, words)) == ["x", "l1", "v2"]
    assert ids(RrfFuser(k=60).fuse(lists, question)) == ["x", "v2", "l1"]


def test_the_question_settings_reach_the_fusion_config() -> None:
    config = retrieval_config(RetrieverSettings(question_vector_weight=2.0, question_min_words=6))
    assert channel_weights(config, None, query_shape("how is the heap limit set"))[V] == 2.0
    assert channel_weights(config, None, query_shape("how is the limit set"))[V] == 1.0
    with pytest.raises(ValidationError, match="question_vector_weight"):
        RetrieverSettings(question_vector_weight=0)
