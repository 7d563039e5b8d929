"""The exact-identifier rule shared by the lexical stores and the fused list:
what a chunk holds, and the `lead` order."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.analysis.identifiers import query_identifiers
from services.core.exact_match import lead_holder, matched_identifiers
from services.core.models import StoredChunk

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Hit:
    name: str
    exact: tuple[str, ...] = ()


def chunk(text: str, title: str = "", heading: str = "") -> StoredChunk:
    return StoredChunk("c1", "d1", 0, text, "", title, heading, "s", "en")


def test_identifiers_held_in_query_order_from_every_field() -> None:
    held = chunk("Set chunkSize=800 before indexing.", title="Error 429", heading="Limits")
    wanted = query_identifiers("429 chunkSize=800 text-embedding-v4")  # the query's forms
    assert matched_identifiers(held, wanted) == ("429", "chunksize=800")


def test_an_identifier_inside_a_longer_one_is_not_held() -> None:
    wanted = query_identifiers("text-embedding-v4")
    assert matched_identifiers(chunk("We ship text-embedding-v45."), wanted) == ()


def test_the_first_hit_holding_the_most_leads_and_the_rest_keep_their_order() -> None:
    hits = [Hit("a"), Hit("b", ("429",)), Hit("c", ("429", "v4")), Hit("d", ("429", "v4"))]
    assert [hit.name for hit in lead_holder(hits)] == ["c", "a", "b", "d"]


def test_no_holder_leaves_the_order_alone() -> None:
    hits = [Hit("a"), Hit("b")]
    assert lead_holder(hits) == hits
    assert lead_holder([]) == []


@given(st.lists(st.integers(min_value=0, max_value=3), max_size=12))
def test_lead_is_a_permutation_that_moves_one_hit_at_most(held: list[int]) -> None:
    hits = [Hit(str(i), tuple(f"id{j}" for j in range(n))) for i, n in enumerate(held)]
    led = lead_holder(hits)
    assert sorted(hit.name for hit in led) == sorted(hit.name for hit in hits)
    if any(held):
        assert len(led[0].exact) == max(held)
        assert [hit for hit in hits if hit is not led[0]] == led[1:]
    else:
        assert led == hits
