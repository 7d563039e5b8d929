"""The web page and widget show what the index holds (titles, URLs, snippets,
the Retriever's reasons) as text, never as HTML: a title such as
`<script>alert(1)</script>` is stored as written (services.indexer.validation)
and must reach the reader as those characters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

STATIC = Path(__file__).resolve().parents[2] / "gateway" / "static"
# Every DOM API that parses a string as markup or code.
MARKUP_SINKS = re.compile(
    r"\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|createContextualFragment"
    r"|DOMParser|\beval\s*\(|new\s+Function\s*\(|srcdoc"
)


@pytest.mark.parametrize("name", ["widget.js", "index.html"])
def test_no_string_is_ever_parsed_as_markup_or_code(name: str) -> None:
    source = (STATIC / name).read_text(encoding="utf-8")
    assert MARKUP_SINKS.findall(source) == []


def test_text_goes_through_text_content_and_links_only_to_http() -> None:
    widget = (STATIC / "widget.js").read_text(encoding="utf-8")
    assert 'if (key === "text") node.textContent = attrs[key];' in widget
    assert 'parsed.protocol === "http:" || parsed.protocol === "https:"' in widget
    # Every link target goes through safeHref (a hit, a source, a translation).
    assert re.findall(r"href: (\w+)", widget) == ["href", "href", "href"]
    assert widget.count("var href = safeHref(") == 3
