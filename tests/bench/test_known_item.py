"""Known-item queries generated from pages: a remembered word is rare, every
page holding the words counts as relevant, a line is the page's own text;
and the report section."""

from __future__ import annotations

import pytest

from bench.eval.known_item import LINE_WORDS, make_queries
from bench.reports.channel_weights import known_item_section
from services.core.models import Document
from tests.bench.records import MACHINE

pytestmark = pytest.mark.unit

FILLER = "Several ordinary sentences describe common settings for every ordinary reader here."


LINE = "The quick command removes packs which nobody needs anymore."


def _page(doc_id: str, special: str) -> Document:
    return Document(doc_id=doc_id, text=f"# {doc_id}\n\n{special}.\n\n{FILLER}\n\n{LINE}\n")


def _name(i: int) -> str:
    """A word of letters only, one per page."""
    return "zorblax" + chr(97 + i // 26) + chr(97 + i % 26)


def test_a_remembered_word_is_rare_and_every_page_holding_the_words_is_relevant() -> None:
    pages = [_page(f"p{i}.md", f"{_name(i)} gadget") for i in range(30)]
    queries = make_queries(pages, pages=5)
    words_1 = [q for q in queries if q.kind == "words-1"]
    assert words_1 and all(q.text.startswith("zorblax") for q in words_1)
    for query in words_1:
        page = next(i for i in range(30) if _name(i) == query.text)
        assert query.relevant == (f"p{page}.md",)
    line = next(q for q in queries if q.kind == "line")
    assert len(line.text.split()) == LINE_WORDS
    # The same sentence is on every page: every page is relevant to it.
    assert len(line.relevant) == 30


def test_the_section_shows_each_weight_per_kind() -> None:
    scores = {"hit@1": 0.5, "mrr@10": 0.6}
    run = {
        "command": "python -m bench.eval.known_item",
        "date": "2026-11-29T00:00:00+00:00",
        "git_revision": "abc",
        "machine": MACHINE,
        "pages": 300,
        "queries": {"words-1": 2, "line": 1},
        "examples": {"words-1": "zorblax", "line": "one two three"},
        "figures": {"vector weight 1": {"kinds": {"words-1": scores, "line": scores}}},
    }
    section = known_item_section(run)
    assert "| vector weight 1 | 0.500 / 0.600 | 0.500 / 0.600 |" in section
