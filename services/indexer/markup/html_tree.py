"""An HTML page's tree with the end tags HTML lets a page leave out.

HTML closes an open `<p>` when a block starts (`<h2>`, `<pre>`, `<ul>`,
`<table>`, another `<p>` ...), an open `<li>` at the next `<li>`, an open
`<dt>` or `<dd>` at the next `<dt>` or `<dd>`, an open table cell at the next
cell and an open row at the next row; pages written by hand and by older
generators rely on it (sqlite.org's pages, man2html's, Texinfo's
definition lists). The standard-library parser does not: it nests each
such element inside the open one, and the renderer then read a whole page
after an unclosed `<p>` as one paragraph, headings and code included, and a
list whose items were left open as one item (a real-docs probe: bash(1) by
man2html lost every heading after DESCRIPTION, sqlite's pragma page was one
76,000-character paragraph). `parsed_html` closes them as a browser does
(the WHATWG rules, simplified: the scope walks below stop at the elements
those rules name, and look at most `MAX_SCOPE_WALK` levels down, so that a
hostile page cannot make each start tag walk a deep stack).
"""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup, Tag

# Start tags that close an open <p> ("has a p element in button scope").
_CLOSES_P = frozenset({
    "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div",
    "dl", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "header", "hgroup", "hr", "li", "dd", "dt", "listing", "main", "menu", "nav", "ol",
    "p", "pre", "search", "section", "summary", "table", "ul", "xmp",
})  # fmt: skip
_P = frozenset({"p"})
# Where the search for an open <p> stops (button scope).
_P_SCOPE = frozenset({
    "applet", "button", "caption", "html", "marquee", "object", "table", "td", "template",
    "th", "math", "svg",
})  # fmt: skip
# Which open elements each list-item start tag closes.
_ITEMS = {"li": frozenset({"li"}), "dt": frozenset({"dt", "dd"}), "dd": frozenset({"dt", "dd"})}
# Where the search for an open item stops: the special elements but address,
# div and p (a list, a table, a section ... holds its own items).
_ITEM_SCOPE = _P_SCOPE | _CLOSES_P.difference({"address", "div", "p", "li", "dd", "dt"}) | {
    "body", "tbody", "thead", "tfoot", "tr", "select",
}  # fmt: skip
# Table cells and rows: a cell or row start closes the open cell (row) of its
# own table, and whatever a page left open in the table outside a cell (a
# browser's "clear the stack back to a table context"), never a cell or row
# of a table around it.
_SECTIONS = frozenset({"table", "tbody", "thead", "tfoot"})
_CELLS = {
    "td": (frozenset({"td", "th"}), _SECTIONS | {"tr"}),
    "th": (frozenset({"td", "th"}), _SECTIONS | {"tr"}),
    "tr": (frozenset({"tr"}), _SECTIONS),
}
MAX_SCOPE_WALK = 64


def parsed_html(html: str) -> BeautifulSoup:
    """`html` parsed by the standard-library parser, with the end tags HTML
    implies (module docstring)."""
    return _ImpliedEndTags(html, "html.parser")


class _ImpliedEndTags(BeautifulSoup):
    """Closes the elements a start tag implicitly ends before opening it."""

    def handle_starttag(self, name: str, *args: Any, **kwargs: Any) -> Tag | None:
        self.endData()  # pending text belongs to the element about to close
        if name in _ITEMS:
            self._close_open(_ITEMS[name], _ITEM_SCOPE)
        elif name in _CELLS:
            self._close_open(*_CELLS[name], keep_scope=True)
        if name in _CLOSES_P:
            self._close_open(_P, _P_SCOPE)
        return super().handle_starttag(name, *args, **kwargs)

    def _close_open(
        self, names: frozenset[str], scope: frozenset[str], *, keep_scope: bool = False
    ) -> None:
        """Pop the stack down to and including the nearest open element named
        in `names`; an element of `scope` met first ends the search, and with
        `keep_scope` what is open above it is popped (it stays)."""
        watched = names | scope if keep_scope else names
        if not any(self.open_tag_counter.get(name) for name in watched):
            return
        stack = self.tagStack
        for depth in range(1, min(len(stack), MAX_SCOPE_WALK + 1)):
            tag = stack[-depth]
            if tag.name in names or (keep_scope and tag.name in scope):
                for _ in range(depth if tag.name in names else depth - 1):
                    self.popTag()
                return
            if tag.name in scope or tag.name in ("html", "template"):
                return
