"""A body as the chunker reads it (services/indexer/body.py): what an
unspecified content type is read as, and a leading byte order mark."""

from __future__ import annotations

import pytest

from services.core.models import ContentType, Document
from services.indexer.body import guess_content_type, normalize_body

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "text",
    [
        "<!DOCTYPE html><html><body><p>x</p></body></html>",
        "<!doctype html>\n<title>t</title><p>x",
        '\ufeff\n  <html lang="en"><body>x</body></html>',
        "<!-- saved from url=(0014)about:internet -->\n<!DOCTYPE HTML>\n<p>x",
        "<HTML>\n<BODY>x</BODY></HTML>",
    ],
)
def test_a_saved_web_page_is_read_as_html(text: str) -> None:
    assert guess_content_type(text) is ContentType.HTML


@pytest.mark.parametrize(
    "text",
    [
        "# Title\n\n<!doctype html> in a code span is text",
        "<div align=center><img src=logo.png></div>\n\n# Project",  # a README's HTML block
        "<htmlish> is not a tag we know",
        "",
        "\ufeff# Title",
    ],
)
def test_anything_else_is_read_as_markdown(text: str) -> None:
    assert guess_content_type(text) is ContentType.MARKDOWN


@pytest.mark.parametrize("content_type", list(ContentType))
def test_a_leading_byte_order_mark_is_not_part_of_the_body(content_type: ContentType) -> None:
    text = "\ufeff# Setup\n\nport settings"
    if content_type is ContentType.HTML:
        text = "\ufeff<h1>Setup</h1><p>port settings</p>"
    body = normalize_body(Document("d", text, content_type=content_type))
    assert not body.startswith("\ufeff")
    assert body.startswith("# Setup")
