"""Locale turns by document (services.retriever.locale_turns), on generated
lists: empty ones, one locale alone, pages of one chunk or of many."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.retriever.fusion import cap_per_document
from services.retriever.locale_turns import interleaved_documents
from services.retriever.types import FusedHit
from tests.retriever.factories import hit

pytestmark = pytest.mark.unit

# One locale's fused list: each entry is the page (0-5) of the next chunk.
PAGES = st.lists(st.integers(min_value=0, max_value=5), max_size=30)


def locale_list(locale: str, pages: list[int]) -> list[FusedHit]:
    return [hit(f"{locale}{n}", doc_id=f"{locale}-p{page}") for n, page in enumerate(pages)]


@given(st.lists(PAGES, max_size=4))
def test_every_chunk_once_and_each_list_in_its_own_order(pages: list[list[int]]) -> None:
    lists = [locale_list(f"l{i}", p) for i, p in enumerate(pages)]
    merged = [h.chunk.chunk_id for h in interleaved_documents(lists)]
    assert sorted(merged) == sorted(h.chunk.chunk_id for hits in lists for h in hits)
    for hits in lists:
        ids = [h.chunk.chunk_id for h in hits]
        assert [c for c in merged if c in set(ids)] == ids


@given(PAGES, PAGES)
def test_with_one_chunk_per_page_the_locales_alternate_pages(en: list[int], zh: list[int]) -> None:
    capped = cap_per_document(
        interleaved_documents([locale_list("en", en), locale_list("zh", zh)]), 1
    )
    locales = [h.chunk.doc_id.split("-")[0] for h in capped]
    shared = 2 * min(len(set(en)), len(set(zh)))
    assert locales[:shared] == ["en", "zh"] * (shared // 2)
    assert len(capped) == len(set(en)) + len(set(zh))
