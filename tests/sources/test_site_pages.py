"""One page of a site as read (unit): what its head declares, its title as
a reader sees it, and the one-line title the Indexer accepts."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.models import ContentType
from services.sources.site_pages import (
    PLAIN_TITLE_WITHIN,
    first_h1,
    one_line,
    page_body,
    plain_title,
    read_page,
)
from services.sources.site_walk import SiteFile

pytestmark = pytest.mark.unit


def _read(tmp_path: Path, name: str, data: bytes) -> tuple[str, str, ContentType]:
    (tmp_path / name).write_bytes(data)
    page = read_page(SiteFile(name, tmp_path / name), fallback_encoding="")
    body = page_body(page)
    return body.title, page.declared_locale() or "", body.content_type


def test_each_kind_of_page_is_titled_as_its_reader_sees_it(tmp_path: Path) -> None:
    front = "---\nlang: zh-CN\ntitle: 快速开始\n---\n# Other\n".encode()
    assert _read(tmp_path, "a.md", front) == ("快速开始", "zh-CN", ContentType.MARKDOWN)
    html = b'<html lang="en-US"><body><h1>Crash safety</h1><p>All or nothing.</p></body></html>'
    assert _read(tmp_path, "b.html", html) == ("Crash safety", "en-US", ContentType.MARKDOWN)
    rest = b"Logging HOWTO\n=============\n\nText.\n"
    assert _read(tmp_path, "c.rst", rest) == ("Logging HOWTO", "", ContentType.TEXT)
    manual = gzip.compress(b".TH DU 1\n.SH NAME\ndu \\- estimate file space usage\n")
    assert _read(tmp_path, "du.1.gz", manual) == ("DU(1)", "", ContentType.MARKDOWN)


def test_a_title_becomes_one_visible_line() -> None:
    assert one_line("Crash\n  safety\u200b: runs\u00ad") == "Crash safety: runs"
    assert first_h1("## Section\n\n# Title\n") == "Title"
    assert first_h1("no heading at all") == ""


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Logging HOWTO\n=============\n\nText.\n", "Logging HOWTO"),
        (
            "#" * 16 + "\n  The Tutorial\n" + "#" * 16 + "\n\nText.\n",
            "The Tutorial",
        ),  # reST overline
        ("From: a@b\nDate: 2008\n\nHow to\n======\n\nText.\n", "How to"),  # git's how-tos
        ("# Title\n\nText.\n", "Title"),
        ("# Copyright (C) 2000 FSF\n#\n# Permission to copy.\n\nText.\n", ""),  # a comment block
        # Debian's changelog ends in a `#` comment; bash's CHANGES underlines a line deep inside.
        ("* Fix.\n\n -- A <a@b>\n\n# Older entries have been removed.\n", ""),
        ("entry.\n\n" * 400 + "4. New Features\n---------------\n", ""),
    ],
)
def test_a_plain_texts_title_is_at_its_top(text: str, title: str) -> None:
    assert plain_title(text) == title


_TEXT_LINES = st.sampled_from(
    ["Title", "=====", "-----", "# Heading", "#", "## Sub", "", "Prose line.", "x" * 1_100]
)


@settings(max_examples=300)
@given(st.lists(_TEXT_LINES, max_size=30))
def test_any_arrangement_of_titles_and_prose_gives_one_of_its_lines(lines: list[str]) -> None:
    """Underlines, `#` lines, comments and prose in any order: read without
    error, and a title found is one of the text's lines: an underlined one as
    written (`## Sub` over `=====`), a `#` line with its `#` taken off."""
    text = "\n".join(lines) + "\n"
    title = plain_title(text)
    assert not title or any(title in (line, line.lstrip("# ")) for line in text.splitlines())


@given(st.integers(0, 2 * PLAIN_TITLE_WITHIN), st.sampled_from(["Title\n=====\n", "# Title\n"]))
def test_a_title_counts_only_when_it_starts_near_the_top(filler: int, title: str) -> None:
    """Around the limit: prose of `filler` characters, then a title."""
    prose = ("word " * (filler // 5 + 1))[:filler].strip()
    text = f"{prose}\n\n{title}\nText.\n" if prose else f"{title}\nText.\n"
    starts = text.index("Title")
    near_top = starts < PLAIN_TITLE_WITHIN and (title.startswith("Title") or not prose)
    assert plain_title(text) == ("Title" if near_top else "")
