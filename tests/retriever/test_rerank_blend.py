"""Which pairs the Reranker reads (script of the text), and how the scored
candidates are placed: the fitted blend of fused and reranker rank among the
places they held, every unscored candidate in its own fused place."""

from __future__ import annotations

import pytest

from services.retriever.fusion import RerankBlend, place_reranked, reranked_order
from services.retriever.rerank_languages import ReadableFilter, parse_languages, script_language
from services.retriever.types import FusedHit
from tests.retriever.factories import chunk

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("How do I keep the two stores in step?", ""),
        ("柏林有多少居民？", "zh"),
        ("使用 git commit 提交更改", "zh"),  # a CJK character weighs a Latin word
        ("The 柏林 page lists every district of the city and its population.", ""),
        ("ベルリンの人口は何人ですか", "ja"),
        ("베를린의 인구는 몇 명입니까", "ko"),
        ("429 Too Many Requests: retry after the Retry-After header", ""),
    ],
)
def test_script_language(text: str, language: str) -> None:
    assert script_language(text) == language


def test_an_english_model_reads_latin_script_only() -> None:
    english = ReadableFilter(parse_languages("en"))
    assert english.unread("柏林有多少居民？") == "zh"
    assert english.unread("How many people live in Berlin?") == ""
    everything = ReadableFilter(parse_languages("*"))
    assert everything.reads_everything and everything.unread("柏林有多少居民？") == ""
    assert ReadableFilter(parse_languages("en, zh")).unread("柏林有多少居民？") == ""


def hits(*ids: str) -> list[FusedHit]:
    return [FusedHit(chunk(i), fused_score=1.0 / (n + 1)) for n, i in enumerate(ids)]


def test_unscored_candidates_keep_their_places() -> None:
    # c and e are not read (or not scored in time): they stay 3rd and 5th.
    placed = place_reranked(hits("a", "b", "c", "d", "e"), {0: 0.1, 1: 0.5, 3: 0.9})
    assert [h.chunk.chunk_id for h in placed] == ["d", "b", "c", "a", "e"]
    assert [h.reranked for h in placed] == [True, True, False, True, False]


def test_the_blend_weighs_fused_rank_against_reranker_rank() -> None:
    scores = {0: 1.0, 1: 2.0, 2: 3.0}  # the reranker reverses the fused order
    reranker_only = RerankBlend(0.0, 1.0, 1.0)
    fused_heavy = RerankBlend(3.0, 1.0, 1.0)
    assert reranked_order(3, scores, reranker_only) == [2, 1, 0]
    assert reranked_order(3, scores, fused_heavy) == [0, 1, 2]
    # Equal weights, k=1: the ends tie at 1/2 + 1/4 and keep their fused order; the
    # middle, 1/3 + 1/3, comes last.
    assert reranked_order(3, scores, RerankBlend(1.0, 1.0, 1.0)) == [0, 2, 1]


def test_a_non_finite_score_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        place_reranked(hits("a", "b"), {0: float("nan")})
    with pytest.raises(ValueError, match="outside"):
        place_reranked(hits("a", "b"), {2: 1.0})


def test_the_gate_keeps_fusion_unless_the_reranker_disagrees_by_its_margin() -> None:
    gated = RerankBlend(0.0, 1.0, 1.0, gate=2.0)
    # The best score beats the first scored candidate's by 1.5 < 2: fused order stands.
    assert not gated.opens([1.0, 2.5, 0.0])
    assert reranked_order(3, {0: 1.0, 1: 2.5, 2: 0.0}, gated) == [0, 1, 2]
    # By 2.5: the reranker's order, even over unscored places (1 is not scored).
    assert gated.opens([1.0, 3.5])
    assert reranked_order(3, {0: 1.0, 2: 3.5}, gated) == [2, 1, 0]
    # The first *scored* candidate is the reference, not the first place.
    assert reranked_order(4, {1: 0.0, 2: 1.0, 3: 5.0}, gated) == [0, 3, 2, 1]
    # No gate (0) always opens; one score has nothing to reorder.
    assert RerankBlend(gate=0.0).opens([3.0, 3.0]) and not gated.opens([9.0])
