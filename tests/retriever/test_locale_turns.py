"""Locale turns by document (services.retriever.locale_turns), on generated
lists: empty ones, one locale alone, pages of one chunk or of many."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.translation_links import TRANSLATIONS_KEY, Translation, encode_translations
from services.retriever.fusion import cap_per_document
from services.retriever.locale_turns import interleaved_documents, one_place_per_translation
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


def _page(chunk_id: str, doc_id: str, locale: str, versions: dict[str, str]) -> FusedHit:
    """A hit on `doc_id` in `locale` whose page links `versions` (locale → doc)."""
    linked = [Translation(loc, doc, f"/{doc}") for loc, doc in sorted(versions.items())]
    value, _ = encode_translations(linked, 10_000)
    base = hit(chunk_id, doc_id=doc_id)
    stored = replace(base.chunk, locale=locale, metadata={TRANSLATIONS_KEY: value})
    return replace(base, chunk=stored)


CHOWN_ZH = {"en": "en/chown"}
CHOWN_EN = {"zh-CN": "zh-CN/chown"}


def _chinese_first(locale: str) -> bool:
    return locale.startswith("zh")


def test_a_translation_of_a_placed_page_follows_the_other_hits() -> None:
    hits = [
        _page("a", "zh-CN/chown", "zh-CN", CHOWN_ZH),
        _page("b", "en/chown", "en", CHOWN_EN),  # its translation, second before
        _page("c", "zh-CN/cpio", "zh-CN", {}),
        _page("d", "en/tar", "en", {}),
    ]
    ordered, moved = one_place_per_translation(hits, _chinese_first)
    assert [h.chunk.chunk_id for h in ordered] == ["a", "c", "d", "b"] and moved == 1


def test_the_version_in_the_readers_language_takes_the_better_place() -> None:
    hits = [
        _page("a", "en/scp", "en", {"zh-CN": "zh-CN/scp"}),
        _page("b", "zh-CN/ssh", "zh-CN", {}),
        _page("c", "zh-CN/scp", "zh-CN", {"en": "en/scp"}),
        _page("d", "zh-CN/scp", "zh-CN", {"en": "en/scp"}),  # the page's second chunk
    ]
    ordered, moved = one_place_per_translation(hits, _chinese_first)
    assert [h.chunk.chunk_id for h in ordered] == ["c", "b", "d", "a"] and moved == 1


def test_pages_without_a_version_here_and_crossing_answers_stay() -> None:
    hits = [
        _page("a", "zh-CN/at", "zh-CN", {}),  # only in Chinese: an English question's answer
        _page("b", "en/ps", "en", {}),
        _page("c", "en/top", "en", {"zh-CN": "zh-CN/top"}),  # its version is not in the list
    ]
    ordered, moved = one_place_per_translation(hits, lambda locale: locale == "en")
    assert ordered == hits and moved == 0


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["en", "zh-CN"])), max_size=20))
def test_every_hit_kept_once(picks: list[tuple[int, str]]) -> None:
    """Whatever the links: nothing is lost or repeated."""
    hits = [
        _page(f"c{i}", f"{locale}/p{page}", locale, {other: f"{other}/p{page}"})
        for i, (page, locale) in enumerate(picks)
        for other in ["en" if locale != "en" else "zh-CN"]
    ]
    ordered, _ = one_place_per_translation(hits, _chinese_first)
    assert sorted(h.chunk.chunk_id for h in ordered) == sorted(h.chunk.chunk_id for h in hits)


def test_pages_whose_lists_were_cut_still_take_one_place() -> None:
    """Five versions, each list cut to two of the other four (the loader
    bounds `translations`): the links reach every version only together.
    Found by a probe: each page had a group of its own, and the first page
    moved back raised KeyError, so every Retrieve of the scope failed."""
    locales = ["de", "en", "fr", "ja", "zh-CN"]
    pair = [
        _page("b1", "zh-CN/b", "zh-CN", {"en": "en/b"}),
        _page("b2", "en/b", "en", {"zh-CN": "zh-CN/b"}),
    ]
    cut = [
        _page(f"a{i}", f"{loc}/a", loc, {o: f"{o}/a" for o in (locales * 2)[i + 1 : i + 3]})
        for i, loc in enumerate(locales)
    ]
    ordered, moved = one_place_per_translation(pair + cut, lambda locale: locale == "en")
    assert [h.chunk.doc_id for h in ordered][:2] == ["en/b", "en/a"] and moved == 5


def test_a_link_seen_from_one_side_only_joins_the_two_pages() -> None:
    """A stale page still names its old translation, which no longer names it
    (one page of a pair re-ingested, the other kept by a skipped sync)."""
    hits = [
        _page("a", "zh-CN/guide", "zh-CN", {}),
        _page("b", "en/tar", "en", {}),
        _page("c", "en/guide", "en", {"zh-CN": "zh-CN/guide"}),
    ]
    ordered, moved = one_place_per_translation(hits, lambda locale: locale == "en")
    assert [h.chunk.chunk_id for h in ordered] == ["c", "b", "a"] and moved == 1


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["en", "zh-CN"])), max_size=12),
    st.sets(st.integers(0, 11)),
)
def test_any_links_keep_every_hit_once(picks: list[tuple[int, str]], unlinked: set[int]) -> None:
    """Links as a partial or stale index leaves them: some pages no longer
    name their translation, which still names them. Nothing is lost or
    repeated, and nothing raises (one-sided links did: KeyError)."""
    hits = []
    for i, (page, locale) in enumerate(picks):
        other = "en" if locale != "en" else "zh-CN"
        links = {} if i in unlinked else {other: f"{other}/p{page}"}
        hits.append(_page(f"c{i}", f"{locale}/p{page}", locale, links))
    ordered, _ = one_place_per_translation(hits, _chinese_first)
    assert sorted(h.chunk.chunk_id for h in ordered) == sorted(h.chunk.chunk_id for h in hits)


def test_pages_in_the_readers_language_naming_one_translation_all_keep_their_places() -> None:
    """Four Chinese pages each name the English overview as their version (a
    probe: grouped by the links closed over, three of them went after every
    English hit for a Chinese question)."""
    hits = [_page(f"z{i}", f"zh-CN/p{i}", "zh-CN", {"en": "en/overview"}) for i in range(4)]
    hits.insert(2, _page("o", "en/overview", "en", {}))
    hits.append(_page("x", "en/pricing", "en", {}))
    ordered, moved = one_place_per_translation(hits, _chinese_first)
    assert [h.chunk.chunk_id for h in ordered] == ["z0", "z1", "z2", "z3", "x", "o"]
    assert moved == 1


def test_one_doc_id_in_two_locales_of_a_scope_is_one_page_in_two_languages() -> None:
    """As the Indexer keys a document (doc_id, locale): an API writer may
    give a page's translation the page's own id. In another scope the same
    id is another page."""
    en = _page("a", "setup", "en", {})
    zh = replace(en, chunk=replace(en.chunk, chunk_id="b", locale="zh-CN"))
    elsewhere = replace(zh, chunk=replace(zh.chunk, chunk_id="c", scope_id="other"))
    ordered, moved = one_place_per_translation([zh, elsewhere, en], lambda loc: loc == "en")
    assert [h.chunk.chunk_id for h in ordered] == ["a", "c", "b"] and moved == 1


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["en", "zh-CN", "ja"])), max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=16),
)
def test_a_page_in_the_readers_language_only_ever_moves_up(
    picks: list[tuple[int, str]], links: list[tuple[int, int]]
) -> None:
    """Any links (one way, fanning in, chained, to a page's own id): every hit
    kept once, and none in the reader's language placed lower than it ranked."""
    names = [f"{locale}/p{page}" for page, locale in picks]
    hits = []
    for i, (_, locale) in enumerate(picks):
        named = {picks[b][1]: names[b] for a, b in links if a == i and b < len(names)}
        hits.append(_page(f"c{i}", names[i], locale, named))
    ordered, _ = one_place_per_translation(hits, _chinese_first)
    ids = [h.chunk.chunk_id for h in ordered]
    assert sorted(ids) == sorted(h.chunk.chunk_id for h in hits)
    for i, each in enumerate(hits):
        if _chinese_first(each.chunk.locale):
            assert ids.index(each.chunk.chunk_id) <= i
