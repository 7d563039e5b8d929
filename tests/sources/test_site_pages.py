"""One page of a site as read (unit): what its head declares, its title as
a reader sees it, and the one-line title the Indexer accepts."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from services.core.models import ContentType
from services.sources.site_pages import first_h1, one_line, page_body, plain_title, read_page
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
