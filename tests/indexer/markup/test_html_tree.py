"""The end tags HTML lets a page leave out, closed as a browser closes them
(structures from pages Debian ships: sqlite.org's hand-written pages,
man2html's bash(1), Texinfo's definition lists, DocBook's list items)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.indexer.markup.html_markdown import html_to_markdown
from services.indexer.markup.html_tree import MAX_SCOPE_WALK, parsed_html

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("html", "tree"),
    [
        ("<p>a<p>b<p>c", "<p>a</p><p>b</p><p>c</p>"),
        ("<p>a<h2>H</h2><p>b<pre>x</pre>c", "<p>a</p><h2>H</h2><p>b</p><pre>x</pre>c"),
        ("<p>text<hr>more", "<p>text</p><hr/>more"),
        ("<p><b>bold<ul><li>x</ul>", "<p><b>bold</b></p><ul><li>x</li></ul>"),
        ("<ul><li>a<li>b<p>para<li>c</ul>", "<ul><li>a</li><li>b<p>para</p></li><li>c</li></ul>"),
        (
            "<dl><dt>x<dd>y<p>more</p><dt>z<dd>w</dl>",
            "<dl><dt>x</dt><dd>y<p>more</p></dd><dt>z</dt><dd>w</dd></dl>",
        ),
        (
            "<table><tr><td><p>x<td>y<tr><td>z</table>",
            "<table><tr><td><p>x</p></td><td>y</td></tr><tr><td>z</td></tr></table>",
        ),
    ],
)
def test_an_element_left_open_closes_where_a_browser_closes_it(html: str, tree: str) -> None:
    assert str(parsed_html(html)) == tree


@pytest.mark.parametrize(
    ("html", "tree"),
    [
        # A nested list's items close each other, not the item around the list.
        (
            "<ul><li>a<ul><li>b<li>c</ul><li>d</ul>",
            "<ul><li>a<ul><li>b</li><li>c</li></ul></li><li>d</li></ul>",
        ),
        # A cell's paragraph is the cell's: a block in the cell does not close
        # a paragraph outside the table (button scope), and a nested table's
        # cells do not close the outer table's.
        (
            "<p>a<table><tr><td><p>in<h2>h</h2></td></tr></table>",
            "<p>a</p><table><tr><td><p>in</p><h2>h</h2></td></tr></table>",
        ),
        (
            "<table><tr><td>a<table><tr><td>in</table><td>b</table>",
            "<table><tr><td>a<table><tr><td>in</td></tr></table></td><td>b</td></tr></table>",
        ),
        ("<p>a<button><div>b</div></button>c</p>", "<p>a<button><div>b</div></button>c</p>"),
    ],
)
def test_an_element_in_another_scope_stays_open(html: str, tree: str) -> None:
    assert str(parsed_html(html)) == tree


def test_a_deep_stack_is_walked_a_bounded_depth() -> None:
    """A paragraph under more than MAX_SCOPE_WALK open inline elements is left
    open (the parser's nesting, as before) rather than searched for at every
    start tag; every word is still in the tree."""
    spans = MAX_SCOPE_WALK + 5
    page = "<p>a" + "<span>" * spans + "".join(f"<div>w{i}" for i in range(2000))
    soup = parsed_html(page)
    assert soup.p is not None and soup.p.find("div") is not None
    assert all(f"w{i}" in soup.get_text() for i in range(2000))


_TAGS = (
    "p", "li", "dt", "dd", "td", "tr", "div", "span", "ul", "dl", "table", "h2", "pre", "a",
    "summary", "details",
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    spans=st.integers(min_value=MAX_SCOPE_WALK - 2, max_value=MAX_SCOPE_WALK + 2),
    tags=st.lists(st.sampled_from(_TAGS), min_size=1, max_size=60),
)
def test_any_run_of_open_tags_keeps_every_word_in_order(spans: int, tags: list[str]) -> None:
    """Open elements around the walk's bound (MAX_SCOPE_WALK), in any order and
    never closed: closing them moves no word and loses none."""
    page = "<p>lead " + "<span>" * spans + "".join(f"<{t}>w{i} " for i, t in enumerate(tags))
    words = parsed_html(page).get_text().split()
    assert words == ["lead", *(f"w{i}" for i in range(len(tags)))]


@settings(max_examples=200, deadline=None)
@given(tags=st.lists(st.sampled_from(_TAGS), min_size=1, max_size=60))
def test_any_run_of_open_tags_renders_every_word_apart(tags: list[str]) -> None:
    """Rendered to Markdown, no word of such a page is lost, repeated or glued
    to another. (Not always in order: text a page left between a table's rows
    comes before the table, where a browser moves it.)"""
    page = "<p>lead " + "".join(f"<{t}>w{i} " for i, t in enumerate(tags))
    words = re.findall(r"[a-z0-9]+", html_to_markdown(page)[1])
    assert sorted(words) == sorted(["lead", *(f"w{i}" for i in range(len(tags)))])
