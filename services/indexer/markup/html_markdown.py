"""HTML → Markdown-ish text, so the chunker sees one structural syntax.

Boilerplate (scripts, styles, navigation, headers/footers, asides, forms) is
dropped; a <header> inside an article, a section or the main content is that
section's (often holding the page's <h1>: Docusaurus, MkDocs Material), and is
kept. Site navigation written as other elements (Sphinx's, DocBook's,
Texinfo's) is found by `page_chrome`. The permalink signs
(`<a href="#id">¶</a>`) after headings and definitions stay: dropping them
lowered vector test hit@1 (bench/results/notes/underlined_titles.md).
Headings become `#` lines, paragraphs are separated by blank lines, list
items become `- ` lines, `pre` blocks become fenced code and tables become
`|` rows. Inline markup is flattened to its text (inline `code` keeps its
backticks); text that would read as Markdown markup (`<details>`, `[a](b)`)
is escaped with a backslash, so that the Markdown cleaning keeps it. A list
item holding blocks (paragraphs, code, tables) keeps them apart: its
paragraphs join its `- ` line with a space, its code blocks and tables
follow the line as blocks of their own. A definition (`<dd>`) or a term
holding blocks stays one paragraph, its parts joined by spaces (they were
glued: `xy textmore`); as separate blocks an API entry's description and
its example fell into other chunks, and third-party train hit@1 was lower
(bench/results/notes/html_structure.md). A definition holding a list, a
table or definitions of its own keeps its parts as blocks. A link, a span or
a `<summary>` around blocks (Haddock's and SQLite's `<a><h1>`, rustdoc's
method headings) is rendered as those blocks, and so is a table whose cells
hold a heading, code or details (a layout: gtk-doc's code listings, Haddock's
instances), without a column of line numbers. Uses
beautifulsoup4 with the standard-library parser, closing the elements HTML
lets a page leave open (`html_tree`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from bs4 import BeautifulSoup, NavigableString, PageElement, Tag
from bs4.element import PreformattedString

from services.indexer.markup.html_tree import parsed_html
from services.indexer.markup.markdown_text import escape_markup
from services.indexer.markup.page_chrome import (
    drop_site_navigation,
    drop_skip_links,
    in_sectioning,
    is_marked_chrome,
)

_DROPPED = frozenset({
    "script", "style", "noscript", "nav", "header", "footer", "aside", "form",
    "template", "iframe", "svg", "canvas", "button", "select", "textarea", "head",
})  # fmt: skip
_HEADING_LEVELS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = frozenset({
    "p", "div", "section", "article", "main", "body", "html", "blockquote", "pre",
    "ul", "ol", "li", "table", "figure", "figcaption", "details", "summary", "dl", "dt",
    "dd", "address", "center", "hr", "header", *_HEADING_LEVELS,
})  # fmt: skip
# A definition holding one of these keeps its parts as blocks: a list or
# table made one paragraph lost its structure (bench/results/notes/html_structure.md).
_NESTED_STRUCTURES = frozenset({"ul", "ol", "table", "dl"})
_LAYOUT_BLOCKS = frozenset({"pre", "table", "details", *_HEADING_LEVELS})
_NUMBERS_ONLY = re.compile(r"\s*\d+(?:\s+\d+)*\s*")
_ROW_GROUPS = frozenset({"thead", "tbody", "tfoot"})
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
_BACKTICK_RUN = re.compile(r"`+")
_COMMENT_END = re.compile(r"--!?>")
_LOOKS_STRUCTURAL = re.compile(r"#{1,6}(?:\s|$)|\||```|~~~")
# Deepest element rendered as structure; deeper ones are rendered as their
# text. The renderer recurses (two frames a level), and the standard-library
# parser nests what HTML leaves unclosed: valid HTML such as 600 `<p>`s
# without `</p>` is 600 levels deep, past Python's recursion limit.
MAX_RENDERED_DEPTH = 200


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title, Markdown text). The title is `<title>`, else the first `<h1>`.
    A NUL character in the page is dropped, as a browser drops it (javadoc
    writes the constant `'\\0'` raw: the Indexer refused the whole page)."""
    soup = parsed_html(without_comments(html.replace("\x00", "")))
    title = _collapse(soup.title.get_text()) if soup.title else ""
    if not title and (h1 := soup.find("h1")):
        title = _collapse(h1.get_text())
    drop_site_navigation(soup)
    drop_skip_links(soup)
    _flatten_below(soup, MAX_RENDERED_DEPTH)
    return title, "\n\n".join(_render_children(soup))


def without_comments(html: str) -> str:
    """`html` without its comments, read as a browser reads them: one that
    is never closed runs to the end of the file (the standard-library parser
    kept it all as text: a draft note hidden that way was indexed and quoted,
    probe), `<!-->` and `<!--->` close at once, and `--!>` closes too."""
    kept: list[str] = []
    pos = 0
    while (at := html.find("<!--", pos)) >= 0:
        kept.append(html[pos:at])
        body = at + len("<!--")
        if html.startswith(">", body) or html.startswith("->", body):
            pos = html.find(">", body) + 1
            continue
        end = _COMMENT_END.search(html, body)  # the nearest: linear over many comments
        if end is None:
            return "".join(kept)
        pos = end.end()
    kept.append(html[pos:])
    return "".join(kept)


def _dropped(tag: Tag) -> bool:
    # A <header> inside an article, a section or the main content is that
    # section's (often holding the page's <h1>: Docusaurus, MkDocs Material),
    # not the site's banner: it is kept.
    if tag.name in _DROPPED:
        return tag.name != "header" or not in_sectioning(tag)
    return is_marked_chrome(tag)


def _flatten_below(soup: BeautifulSoup, depth: int) -> None:
    """Each element `depth` levels down becomes its text (dropped ones go),
    without recursion, so that rendering never nests deeper than that."""
    level: list[Tag] = [soup]
    for _ in range(depth):
        level = [child for node in level for child in node.children if isinstance(child, Tag)]
    for tag in level:
        if _dropped(tag):
            tag.extract()
        else:
            tag.replace_with(NavigableString(tag.get_text()))


def _render_children(node: Tag) -> list[str]:
    """Block-level Markdown for a node's children; loose inline runs become paragraphs."""
    return _render_nodes(node.children)


def _render_nodes(nodes: Iterable[PageElement]) -> list[str]:
    blocks: list[str] = []
    inline: list[str] = []
    for child in nodes:
        if isinstance(child, Tag) and _dropped(child):
            continue
        if isinstance(child, Tag) and child.name in _BLOCKS:
            blocks.extend(_paragraphs("".join(inline)))
            inline.clear()
            blocks.extend(_render_block(child))
        elif isinstance(child, Tag) and child.find(_BLOCKS) is not None:
            # A link or span around blocks (HTML5 lets `<a>` hold a heading:
            # Haddock's and SQLite's section titles) holds blocks, not words:
            # rendered inline, its headings were lost and glued to the next.
            blocks.extend(_paragraphs("".join(inline)))
            inline.clear()
            blocks.extend(_render_children(child))
        else:
            inline.append(_inline_text(child))
    blocks.extend(_paragraphs("".join(inline)))
    return [b for b in blocks if b]


def _render_block(tag: Tag) -> list[str]:
    name = tag.name
    if name in _HEADING_LEVELS:
        text = _collapse(_inline_text(tag))
        return ["#" * _HEADING_LEVELS[name] + " " + text] if text else []
    if name == "pre":
        return [] if _line_numbers(tag) else [_fenced(tag)]
    if name == "div" and (code := _code_lines(tag)) is not None:
        return [_fence(code, "")]
    if name in ("ul", "ol"):
        return _list_blocks(tag)
    if name == "table":
        outside = [block for node in _outside_rows(tag) for block in _render_nodes([node])]
        rows = _own_rows(tag)
        if (cells := _layout_cells(rows)) is not None:
            return outside + [b for cell in cells for b in _render_children(cell)]
        return [*outside, _table(rows)]
    if name == "blockquote":
        inner = "\n\n".join(_render_children(tag))
        return ["\n".join(f"> {line}".rstrip() for line in inner.split("\n"))] if inner else []
    if name == "hr":
        return []
    if name == "summary" and _holds_blocks(tag.children):
        return _render_children(tag)  # rustdoc: each method's heading is in one
    if name in ("p", "dt", "dd", "summary", "figcaption", "address"):
        if name == "dd" and _holds(tag.children, _NESTED_STRUCTURES):
            return _render_children(tag)  # bash's `shopt` options: 12,666 characters in one
        if _holds_blocks(tag.children):  # its parts apart, in one paragraph
            return _paragraphs(" ".join(_inline_text(child) for child in tag.children))
        return _paragraphs(_inline_text(tag))
    return _render_children(tag)


def _inline_text(node: PageElement) -> str:
    """Flattened text of inline content; `<br>` is kept as a line break."""
    if isinstance(node, PreformattedString):  # comments, doctype, CDATA, ...
        return ""
    if isinstance(node, NavigableString):
        # Page text that reads as Markdown markup ("the <details> element")
        # is escaped, so that cleaning the Markdown keeps it as text.
        return escape_markup(_SPACES.sub(" ", str(node)))
    if not isinstance(node, Tag) or _dropped(node):
        return ""
    if node.name == "br":
        return "\n"
    if node.name == "code":
        code = _collapse(node.get_text())
        return _inline_code(code) if code else ""
    if node.name == "img":
        return str(node.get("alt") or "")
    return "".join(_inline_text(child) for child in node.children)


def _paragraphs(text: str) -> list[str]:
    lines = [_escape_structure(line.strip()) for line in text.split("\n")]
    joined = "\n".join(line for line in lines if line)
    return [joined] if joined else []


def _escape_structure(line: str) -> str:
    """Text that merely looks like a heading, table row or fence must stay text."""
    return "\\" + line if _LOOKS_STRUCTURAL.match(line) else line


def _collapse(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _inline_code(code: str) -> str:
    runs = [len(run) for run in _BACKTICK_RUN.findall(code)]
    ticks = "`" * (max(runs, default=0) + 1)
    padding = " " if code.startswith("`") or code.endswith("`") else ""
    return f"{ticks}{padding}{code}{padding}{ticks}"


def _fenced(pre: Tag) -> str:
    """A `pre` block as a fenced code block."""
    return _fence(pre.get_text().strip("\n"), _language(pre))


def _fence(code: str, language: str) -> str:
    """`code` in a fence longer than any backtick run inside."""
    runs = [len(run) for run in _BACKTICK_RUN.findall(code)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{language}\n{code}\n{fence}"


def _code_lines(tag: Tag) -> str | None:
    """The code of a block written as one `div` per line, as Doxygen writes
    every code fragment and source listing (`<div class="fragment">` of
    `<div class="line">`, each line led by its number): its lines without
    their numbers. None for any other block. Rendered as paragraphs, a
    header file was one paragraph per numbered line, each name in it
    followed by its hover tooltip (`<div class="ttc">`, hidden on the page:
    "Json::Value Represents a JSON value. Definition: value.h:193"), which goes."""
    if "fragment" not in tag.get_attribute_list("class"):
        return None
    parts = [child for child in tag.children if isinstance(child, Tag)]
    lines = [part for part in parts if "ttc" not in part.get_attribute_list("class")]
    if not lines or any("line" not in line.get_attribute_list("class") for line in lines):
        return None
    return "\n".join(_code_line(line) for line in lines).strip("\n")


def _code_line(line: Tag) -> str:
    number = line.find("span", class_="lineno")
    # The number's text, also when Doxygen 1.9 wraps it in a link to the listing.
    numbering = {id(node) for node in number.find_all(string=True)} if number else set()
    text = "".join(node for node in line.find_all(string=True) if id(node) not in numbering)
    return text.removeprefix("\xa0").rstrip()


def _language(pre: Tag) -> str:
    code = pre.find("code")
    for tag in (pre, code):
        classes = tag.get("class") if isinstance(tag, Tag) else None
        for cls in classes or []:
            for prefix in ("language-", "lang-"):
                if cls.startswith(prefix):
                    return cls.removeprefix(prefix)
    return ""


def _list_blocks(listing: Tag) -> list[str]:
    """A list as Markdown blocks: runs of `- ` lines (nested lists indented),
    and the code blocks, tables and later paragraphs of an item between them."""
    blocks: list[str] = []
    lines: list[str] = []
    for line, block in _list_parts(listing, depth=0):
        if line:
            lines.append(line)
            continue
        if lines:
            blocks.append("\n".join(lines))
            lines = []
        blocks.append(block)
    if lines:
        blocks.append("\n".join(lines))
    return blocks


def _list_parts(listing: Tag, depth: int) -> Iterator[tuple[str, str]]:
    """(an item's line, "") or ("", a block of an item), in order."""
    for item in listing.children:
        if type(item) is NavigableString and (loose := _collapse(str(item))):  # not a comment
            # An item flattened to its text at MAX_RENDERED_DEPTH (or text
            # outside any <li>): kept as an item rather than lost.
            yield "  " * depth + "- " + loose, ""
        if not isinstance(item, Tag):
            continue
        if item.name in ("ul", "ol"):  # a list written straight into a list
            yield from _list_parts(item, depth + 1)
            continue
        if item.name != "li":  # text or blocks outside any item: kept as an item's
            yield from _item_parts([item], depth)
            continue
        nested = [c for c in item.children if isinstance(c, Tag) and c.name in ("ul", "ol")]
        content = [c for c in item.children if c not in nested]
        yield from _item_parts(content, depth)
        for sublist in nested:
            yield from _list_parts(sublist, depth + 1)


def _item_parts(content: list[PageElement], depth: int) -> Iterator[tuple[str, str]]:
    """An item's `- ` line: its text, or the paragraphs it opens with joined
    by a space; its other blocks (code, tables, quotes, later paragraphs)
    after the line, each a block of its own."""
    if not _holds_blocks(content):
        if text := _collapse("".join(_inline_text(c) for c in content)):
            yield "  " * depth + "- " + text, ""
        return
    blocks = _render_nodes(content)
    opening: list[str] = []
    while blocks and not _structural(blocks[0]):
        opening.append(_collapse(blocks.pop(0)))
    if opening:
        yield "  " * depth + "- " + " ".join(opening), ""
    for block in blocks:
        yield "", block


def _holds_blocks(nodes: Iterable[PageElement]) -> bool:
    return _holds(nodes, _BLOCKS)


def _holds(nodes: Iterable[PageElement], names: frozenset[str]) -> bool:
    return any(isinstance(node, Tag) and node.name in names for node in nodes)


def _structural(block: str) -> bool:
    """A rendered block that is not a plain paragraph (a fence, a table, a
    heading, a quote or a list)."""
    return block.startswith(("```", "|", "#", ">", "- ", "~~~"))


def _outside_rows(table: Tag) -> list[PageElement]:
    """What a table holds outside its cells (a caption; text or blocks a page
    left between rows or cells, which a browser moves before the table):
    rendered before the rows, instead of lost with them."""
    outside: list[PageElement] = []
    for child in table.children:
        if isinstance(child, Tag) and child.name in _ROW_GROUPS:
            outside += _outside_cells(child.children)
        else:
            outside += _outside_cells([child])
    return outside


def _outside_cells(nodes: Iterable[PageElement]) -> list[PageElement]:
    outside: list[PageElement] = []
    for node in nodes:
        if isinstance(node, Tag) and node.name == "tr":
            outside += [c for c in node.children if not _is_part(c, ("td", "th"))]
        elif not _is_part(node, ("col", "colgroup")):
            outside.append(node)
    return outside


def _is_part(node: PageElement, names: tuple[str, ...]) -> bool:
    return isinstance(node, Tag) and node.name in names


def _layout_cells(rows: list[list[Tag]]) -> list[Tag] | None:
    """The cells of a table that lays out blocks, in order, without those
    holding line numbers; None for a table of data. A cell holding a heading,
    code, details or a table cannot be a Markdown table's cell: gtk-doc puts
    each code listing in one (its lines were one row, each `//` comment then
    running over the code after it), Haddock each instance's methods, and
    page titles sit in layout tables."""
    cells = [cell for row in rows for cell in row]
    if not any(cell.find(_LAYOUT_BLOCKS) is not None for cell in cells):
        return None
    return [cell for cell in cells if not _line_numbers(cell)]


def _line_numbers(tag: Tag) -> bool:
    """A code listing's column of line numbers (gtk-doc's `listing_lines`
    cell, rustdoc's `line-numbers` and Pygments' `linenos` blocks): numbers
    only, in an element whose class speaks of lines."""
    if not any("line" in name.lower() for name in tag.get_attribute_list("class") if name):
        return False
    return _NUMBERS_ONLY.fullmatch(tag.get_text()) is not None


def _own_rows(table: Tag) -> list[list[Tag]]:
    """The cells of each of the table's rows, not of a table inside it (rendered on its own)."""
    return [
        row.find_all(("td", "th"), recursive=False)
        for row in table.find_all("tr")
        if row.find_parent("table") is table
    ]


def _table(own_rows: list[list[Tag]]) -> str:
    rows = []
    width = 0
    for row in own_rows:
        cells = [_collapse(_inline_text(cell)).replace("|", "\\|") for cell in row]
        if cells:
            rows.append("| " + " | ".join(cells) + " |")
            width = width or len(cells)
    if len(rows) > 1:  # a separator row makes the first row a Markdown header
        rows.insert(1, "|" + " --- |" * width)
    return "\n".join(rows)
