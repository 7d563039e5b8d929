"""Lines shaped to make a backtracking pattern quadratic: a long run of
blanks after an opening `#`, `=`, `|---`, `[a](` or `[a]:`. Such a pattern
runs in Python's `re` without releasing the interpreter lock, so a 20 KB line
stalled every service of an embedded stack for 11 s (and 2 MB, the body
limit, would have taken hours). Each line here is 200,000 characters: read in
linear time it takes milliseconds. The timeout is the hang guard, not a speed
check. Where the pattern was replaced, the result is the same as before
(`test_*_as_before`: the former patterns, compared on every short line)."""

from __future__ import annotations

import itertools
import re

import pytest

from services.core.models import ContentType, Document
from services.indexer.body import normalize_body
from services.indexer.chunk_layout import Layout, is_table_delimiter
from services.indexer.chunking import Chunker, ChunkingParams
from services.indexer.heading_syntax import TextSyntax, atx_heading
from services.indexer.markup.markdown_links import DEFINITION
from services.indexer.planning import document_chunks

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]

RUN = 200_000
HOSTILE_LINES = {
    "atx heading": "# a" + " " * RUN + "x",
    "atx heading, tabs": "## a" + "\t" * RUN + "x",
    "table delimiter": "| h |\n|---" + " " * RUN + "x|",
    "link destination": "[a](" + " " * RUN + "x",
    "image destination": "![a](" + " " * RUN + "x",
    "link after <target>": "[a](<b>" + " " * RUN + "x",
    "definition": "[a]:" + " " * RUN + "<",
    "definition title": "[a]: x" + " " * RUN + "y",
    "bracketed link text": "[ " + "[a] " * (RUN // 4) + "x",
    "bracketed texts never closed": ("[ " + "[a] " * 50) * (RUN // 200),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LINES))
@pytest.mark.parametrize("content_type", [ContentType.MARKDOWN, ContentType.TEXT])
def test_hostile_lines_are_chunked_in_linear_time(name: str, content_type: ContentType) -> None:
    line = HOSTILE_LINES[name]
    doc = Document(doc_id="d", text=f"# Page\n\n{line}\n\nLast words.\n", content_type=content_type)
    body = normalize_body(doc, clean=True)
    chunks = document_chunks(Chunker(ChunkingParams()), doc, body)
    assert chunks and "Last words." in chunks[-1].text


def test_asciidoc_and_rest_titles_in_linear_time() -> None:
    text = "= a" + " " * RUN + "x\n\n" + ":a" * (RUN // 2) + "\n" + "=" * RUN + "\n\nBody.\n"
    layout = Layout(text, 1000, TextSyntax.PLAIN)
    first, second = layout.headings
    assert first.title.startswith("a ") and first.title.endswith(" x")
    assert second.title == ":a" * (RUN // 2)


_OLD_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*\r?$")
_OLD_DELIMITER = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*\r?$")


def _lines(alphabet: str, longest: int) -> list[str]:
    return [
        "".join(chars)
        for n in range(longest + 1)
        for chars in itertools.product(alphabet, repeat=n)
    ]


def test_atx_headings_as_before() -> None:
    for line in _lines(" \t#a\n", 7):
        old = _OLD_ATX.match(line)
        expected = None if old is None else (len(old.group(1)), (old.group(2) or "").strip())
        found = atx_heading(line)
        assert (None if found is None else (found[0], found[1].strip())) == expected, repr(line)


def test_table_delimiters_as_before() -> None:
    for line in _lines(" |-:a\n", 7):
        assert is_table_delimiter(line) == bool(_OLD_DELIMITER.fullmatch(line)), repr(line)


def test_link_forms_still_read() -> None:
    """The possessive blanks keep CommonMark's forms: an empty target with a
    title, blanks around a target and its title, a definition on two lines."""
    from services.indexer.markup.markdown_links import _LINK

    def destination(text: str) -> str | None:
        found = _LINK.search(text)
        return None if found is None else found.group("destination")

    assert destination('[a]( "title")') == ' "title"'
    assert destination("[a](  https://x.test/p  'title'  )") == "  https://x.test/p  'title'  "
    assert destination("[a](x(y)z)") == "x(y)z"
    assert destination("[a](x y)") is None
    assert DEFINITION.search('[a]:\n   https://x.test/p "t"  ') is not None
    assert DEFINITION.search('[a]: https://x.test/p "t" junk') is None
