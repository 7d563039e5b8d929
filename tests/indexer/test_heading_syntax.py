"""Underlined titles as headings: Markdown's setext headings, and reST /
AsciiDoc titles in plain text (services.indexer.heading_syntax)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.models import ContentType, Document
from services.indexer.chunk_layout import Layout
from services.indexer.chunking import Chunker, ChunkingParams, TextSyntax
from services.indexer.planning import document_chunks
from services.indexer.work_budget import WorkMeter
from tests.support.chunk_invariants import assert_chunk_invariants, step_bound

pytestmark = pytest.mark.unit

PLAIN, MARKDOWN = TextSyntax.PLAIN, TextSyntax.MARKDOWN
SMALL = ChunkingParams(target_chars=120, overlap_chars=30, max_slack_chars=30)


def titles(text: str, syntax: TextSyntax) -> list[tuple[int, str]]:
    return [(h.level, h.title) for h in Layout(text, 1000, syntax).headings]


# ---------------------------------------------------------------- Markdown


def test_setext_headings_take_levels_one_and_two() -> None:
    prose = "Words of prose that fill a section. " * 4
    text = f"Project\n=======\n\n{prose}\n\nUsage\n-----\n\n{prose}\n\n### Flags\n\n{prose}\n"
    assert titles(text, MARKDOWN) == [(1, "Project"), (2, "Usage"), (3, "Flags")]
    paths = [span.heading_path for span in Chunker(SMALL).split(text)]
    assert paths[0] == "Project"
    assert "Project > Usage" in paths
    assert paths[-1] == "Project > Usage > Flags"


@pytest.mark.parametrize(
    "text",
    [
        "Some prose.\n\n---\n\nMore prose.\n",  # a thematic break after a blank line
        "- item\n---\n",  # a list item
        "> quoted\n---\n",  # a quote
        "    code line\n-----\n",  # indented code
        "first line of a paragraph\nsecond line\n---\n",  # not a one-line paragraph
        "```\ncode\n---\n```\n",  # inside a fence
        "| a | b |\n---\n",  # a table row
        "Title\n~~~~~\n",  # a fence in Markdown, not an underline
    ],
)
def test_markdown_lines_that_are_not_setext_headings(text: str) -> None:
    assert titles(text, MARKDOWN) == []


def test_markdown_does_not_read_rest_titles() -> None:
    assert titles("Section\n^^^^^^^\n\nText.\n", MARKDOWN) == []


# ---------------------------------------------------------------- plain text

GIT_PAGE = """git-stash(1)
============

NAME
----
git-stash - Stash the changes in a dirty working directory away

DESCRIPTION
-----------

Use `git stash` when you want to record the current state.

OPTIONS
-------
push::
\tSave your local modifications to a new stash entry.
"""


def test_asciidoc_page_gets_its_sections() -> None:
    assert titles(GIT_PAGE, PLAIN) == [
        (1, "git-stash(1)"),
        (2, "NAME"),
        (2, "DESCRIPTION"),
        (2, "OPTIONS"),
    ]
    paths = {span.heading_path for span in Chunker(SMALL).split(GIT_PAGE, None, PLAIN)}
    assert "git-stash(1) > DESCRIPTION" in paths
    assert "git-stash(1) > OPTIONS" in paths


def test_rest_levels_follow_the_order_styles_first_appear() -> None:
    text = (
        "=========\nThe guide\n=========\n\nIntro.\n\n"
        "Install\n*******\n\nSteps.\n\nFrom source\n===========\n\nBuild.\n\n"
        "Usage\n*******\n\nRun.\n"
    )
    assert titles(text, PLAIN) == [
        (1, "The guide"),
        (2, "Install"),
        (3, "From source"),
        (2, "Usage"),
    ]


def test_rest_roles_in_a_title_read_as_their_text() -> None:
    text = ":mod:`difflib` --- Helpers for computing deltas\n" + "=" * 48 + "\n\nText.\n"
    assert titles(text, PLAIN) == [(1, "difflib --- Helpers for computing deltas")]


def test_asciidoc_one_line_titles() -> None:
    text = "= Manual\n\n== Setup ==\n\nText.\n\n=== Details\n\nMore.\n"
    assert titles(text, PLAIN) == [(1, "Manual"), (2, "Setup"), (3, "Details")]


def test_wide_titles_need_a_wide_underline() -> None:
    assert titles("快速开始\n========\n\n正文。\n", PLAIN) == [(1, "快速开始")]
    assert titles("快速开始\n====\n\n正文。\n", PLAIN) == []  # 4 columns under 8


@pytest.mark.parametrize(
    "text",
    [
        "Intro:\n\n----\n$ make\n----\n",  # an AsciiDoc listing block of one line
        "----\n$ ls\n----\n",  # a short one: an overline needs a 5-column title
        "or\n----\n$ make\n----\n",  # a word over a listing fence
        "Prose.\n\n--------------\n\nMore prose.\n",  # a reST transition
        "A long line of prose that ends a paragraph\n---\n",  # an underline far too short
        "  indented\n----------\n",  # reST titles are not indented
        "=====\nTitle\n-----\n",  # overline and underline differ
    ],
)
def test_plain_lines_that_are_not_titles(text: str) -> None:
    assert titles(text, PLAIN) == []


def test_plain_text_documents_are_chunked_with_their_titles() -> None:
    doc = Document(doc_id="git-stash.txt", text=GIT_PAGE, content_type=ContentType.TEXT)
    as_text = document_chunks(Chunker(SMALL), doc)
    as_markdown = document_chunks(Chunker(SMALL), Document(doc_id="x", text=GIT_PAGE))
    assert as_text[-1].heading_path == "git-stash(1) > OPTIONS"
    # Markdown reads the same lines as setext headings, `=` and `-` alike.
    assert as_markdown[-1].heading_path == "git-stash(1) > OPTIONS"


# ---------------------------------------------------------------- property

_word = st.text(alphabet="abcdefghijKLMNOP0123", min_size=1, max_size=10)
_title = st.lists(_word, min_size=1, max_size=4).map(" ".join).filter(lambda t: len(t) >= 5)
_styles = st.sampled_from([("=", True), ("=", False), ("-", False), ("~", False), ("#", True)])
_prose = st.lists(_word, min_size=1, max_size=60).map(" ".join)


@st.composite
def rest_docs(draw: st.DrawFn) -> tuple[str, list[tuple[int, str]]]:
    """A reST-like text and its titles with the levels reST gives them."""
    parts: list[str] = []
    expected: list[tuple[int, str]] = []
    levels: dict[tuple[str, bool], int] = {}
    for _ in range(draw(st.integers(1, 8))):
        title, (char, overlined) = draw(_title), draw(_styles)
        rule = char * (len(title) + draw(st.integers(0, 4)))
        parts.append(f"{rule}\n{title}\n{rule}" if overlined else f"{title}\n{rule}")
        level = levels.setdefault((char, overlined), len(levels) + 1)
        expected.append((min(level, 6), title))
        parts.extend(draw(st.lists(_prose, max_size=3)))
    return "\n\n".join(parts) + "\n", expected


@settings(max_examples=100, deadline=None)
@given(doc=rest_docs())
def test_generated_rest_titles_and_invariants(doc: tuple[str, list[tuple[int, str]]]) -> None:
    text, expected = doc
    assert titles(text, PLAIN) == expected
    meter = WorkMeter()
    spans = Chunker(SMALL).split(text, meter, PLAIN)
    assert_chunk_invariants(text, spans, SMALL, PLAIN)
    assert meter.steps <= step_bound(text, SMALL)
    assert spans[0].heading_path.startswith(expected[0][1])
