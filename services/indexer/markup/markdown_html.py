"""HTML inside Markdown, reduced to the text a reader sees.

Markdown allows raw HTML anywhere: `<details>`/`<summary>` blocks, `<kbd>`,
`<img>` logos, `<p align="center">` wrappers. A browser shows their text, not
the tags, so the index should too. Tags are recognised one by one rather
than by parsing the page as HTML (beautifulsoup would also swallow the
Markdown between the tags and read `Vec<String>` as an element), and only
when they are unmistakably HTML:

- the name is that of an HTML element, written in lower case, or in upper
  case when longer than one letter (`<DIV>`): `<T>`, `<String>` and
  `Array<Object>` are text;
- an opening tag glued to a word (`Promise<object>`, `a<b and b>c`) is a
  type parameter or a comparison, unless the element is void (`word<br>`),
  the tag closes itself (`Props<sup class="badge" />`) or it is closed
  later on (`x<sub>2</sub>`);
- the tag is well formed: attributes as `name`, `name=value` or quoted
  values on one line, and `a<b`, `x -> y`, `<https://...>` never are.

A component of the site's framework written in a Markdown page (VitePress
and VuePress pages hold Vue components: `<VueSchoolLink href="…" title="…"/>`,
`<ClientOnly>…</ClientOnly>`, `<Badge text="beta"/>`; Docusaurus `.md` pages
JSX ones) is a tag as well: a capitalised name with a lower-case letter in it,
when the tag cannot be a type name, a placeholder or a value's printed form:
it closes itself (`<Demo />`), is a closing tag (`</ClientOnly>`), or is
closed later on the page. `Vec<String>`, a synopsis's `<Maildir>` and a
Python repr in prose (`<Mock name='m'>`) stay text. The reader sees what the
component renders, which the page does not hold, so the tag goes with its
attributes, and what stands between an opening and a closing tag stays
(.mdx pages are read apart, by the folder loader, before this cleaning).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable

HTML_ELEMENTS = frozenset({
    "a", "abbr", "address", "area", "article", "aside", "audio", "b", "base", "bdi", "bdo",
    "big", "blockquote", "body", "br", "button", "canvas", "caption", "center", "cite",
    "code", "col", "colgroup", "data", "datalist", "dd", "del", "details", "dfn", "dialog",
    "dir", "div", "dl", "dt", "em", "embed", "fieldset", "figcaption", "figure", "font",
    "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr",
    "html", "i", "iframe", "img", "input", "ins", "kbd", "label", "legend", "li", "link",
    "main", "map", "mark", "menu", "meta", "meter", "nav", "noscript", "object", "ol",
    "optgroup", "option", "output", "p", "param", "picture", "pre", "progress", "q", "rp",
    "rt", "ruby", "s", "samp", "script", "search", "section", "select", "slot", "small",
    "source", "span", "strike", "strong", "style", "sub", "summary", "sup", "table",
    "tbody", "td", "template", "textarea", "tfoot", "th", "thead", "time", "title", "tr",
    "track", "tt", "u", "ul", "var", "video", "wbr"
})  # fmt: skip
_VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
    "source", "track", "wbr"
})  # fmt: skip
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
    "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure",
    "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html",
    "legend", "li", "main", "menu", "nav", "ol", "p", "pre", "search", "section", "summary",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"
})  # fmt: skip

# An attribute's name may also open with Vue's shorthands (`@click`, `#header`).
_ATTRIBUTE = (
    r"""(?:\s+[A-Za-z_:@#][-A-Za-z0-9_:.]*(?:\s*=\s*(?:"[^"\n]*"|'[^'\n]*'|[^\s"'=<>`]+))?)"""
)
# `indent`: a tag that opens a line takes the line's indentation with it, so
# the text of an indented HTML block (`  <img alt="logo">`) starts the line.
TAG = re.compile(
    r"(?P<indent>^[ \t]+)?(?<!\\)<(?:/(?P<closing>[A-Za-z][A-Za-z0-9]*)\s*"
    rf"|(?P<opening>[A-Za-z][A-Za-z0-9]*)(?P<attributes>{_ATTRIBUTE}*)\s*/?)>",
    re.MULTILINE,
)
_SCRIPT_OR_STYLE = re.compile(r"(?<!\\)<(script|style|SCRIPT|STYLE)(?:\s[^<>]*)?>")
_CLOSING = re.compile(r"(?<!\\)</([A-Za-z][A-Za-z0-9]*)\s*>")
_ALT = re.compile(r"""\salt\s*=\s*(?:"([^"\n]*)"|'([^'\n]*)'|([^\s"'=<>`]+))""", re.I)
_WORD_CHAR = re.compile(r"\w")
_COMPONENT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")
_TABLE_ROW = re.compile(r"^[ \t]*\|.*$", re.MULTILINE)


def reduce_html(text: str, closed_after: Iterable[str] = ()) -> str:
    """`text` with its HTML elements reduced to their text (see the module
    docstring). `closed_after`: the element names the page closes after
    `text` (in a later block of prose: an opening tag and its closing tag
    often stand on either side of a code block)."""
    text = _without_scripts(text)
    closings, rows = last_closings(text), _TableRows(text)
    closings |= dict.fromkeys(closed_after, len(text))
    return TAG.sub(lambda tag: _tag_replacement(tag, closings, rows), text)


def _without_scripts(text: str) -> str:
    """`text` without its `<script>` and `<style>` elements, content included.
    An element that is never closed stays (its tag goes later, as any tag's);
    once a name has no closing tag left, it is not searched for again."""
    pieces: list[str] = []
    pos, unclosed = 0, set[str]()
    while (opening := _SCRIPT_OR_STYLE.search(text, pos)) is not None:
        name = opening.group(1)
        closing = None if name in unclosed else text.find(f"</{name}", opening.end())
        end = text.find(">", closing) if closing is not None and closing >= 0 else -1
        if end < 0:
            unclosed.add(name)
            pieces.append(text[pos : opening.end()])
            pos = opening.end()
            continue
        pieces.append(text[pos : opening.start()])
        pos = end + 1
    return "".join([*pieces, text[pos:]])


def last_closings(text: str) -> dict[str, int]:
    """Element name → offset of its last closing tag in `text`: looked up once,
    because searching ahead from every opening tag would cost n**2."""
    return {m.group(1).lower(): m.start() for m in _CLOSING.finditer(text)}


def is_html_tag(tag: re.Match[str], closings: dict[str, int]) -> bool:
    """Whether a `TAG` match is an HTML tag, not text that looks like one
    (`closings`: `last_closings` of the text searched)."""
    name = tag.group("opening") or tag.group("closing")
    if _COMPONENT_NAME.fullmatch(name):
        return _is_component(tag, name.lower(), closings)
    if name.lower() not in HTML_ELEMENTS:
        return False
    if not (name.islower() or (len(name) > 1 and name.isupper())):
        return False
    return not _type_parameter(tag, name.lower(), closings)


def _is_component(tag: re.Match[str], name: str, closings: dict[str, int]) -> bool:
    """Whether a tag with a component's name is one (module docstring)."""
    if tag.group("closing") or tag.group(0).endswith("/>"):
        return True
    return closings.get(name, -1) >= tag.end()


def tag_start(tag: re.Match[str]) -> int:
    """Offset of a `TAG` match's `<` (after the indentation it may hold)."""
    return tag.end("indent") if tag.group("indent") else tag.start()


def _type_parameter(tag: re.Match[str], name: str, closings: dict[str, int]) -> bool:
    """`Promise<object>`, `a<b and b>c`: an opening tag right after a word, never
    closed. A tag that closes itself is none (`Props<sup class="badge" />`)."""
    if tag.group("closing") or name in _VOID or tag.group(0).endswith("/>"):
        return False
    start = tag_start(tag)
    if start == 0 or not _WORD_CHAR.match(tag.string, start - 1):
        return False
    return closings.get(name, -1) < tag.end()


def _tag_replacement(tag: re.Match[str], closings: dict[str, int], rows: _TableRows) -> str:
    if not is_html_tag(tag, closings):
        return tag.group(0)
    name = (tag.group("opening") or tag.group("closing")).lower()
    if name == "img" and tag.group("opening"):
        return _alt_text(tag.group("attributes"))
    if name == "br" or name in _BLOCKS:
        if rows.contain(tag.start()):
            return " "
        return "\n" if name == "br" else "\n\n"
    return ""


def _alt_text(attributes: str) -> str:
    alt = _ALT.search(attributes)
    return next((group for group in alt.groups() if group is not None), "") if alt else ""


class _TableRows:
    """The lines of a text that are table rows (`| a | b |`), found once:
    looking back to each tag's line start would cost n**2 on a long line."""

    def __init__(self, text: str) -> None:
        rows = [m.span() for m in _TABLE_ROW.finditer(text)]
        self._starts = [start for start, _ in rows]
        self._ends = [end for _, end in rows]

    def contain(self, pos: int) -> bool:
        index = bisect_right(self._starts, pos) - 1
        return index >= 0 and pos <= self._ends[index]
