"""Which blocks of an HTML page are site navigation, not the page's content.

A navigation block names other pages (the previous, the next, the index, the
way up), the same on every page of a site; kept, it opens or closes each
page's first and last chunk and lends them the neighbours' titles
(bench/results/notes/site_navigation.md). Generators mark it differently:

- `role="navigation"` (Sphinx's "related" bar and footer buttons, Read the
  Docs' breadcrumbs);
- DocBook's classes for its previous/next tables (`navheader`, `navfooter`;
  upper case from the older DSSSL stylesheets);
- a pager: a short block without a heading, holding a link to the next, the
  previous or the parent page, by `rel` or by the access keys n, p, u, h
  (DocBook's tables, Texinfo's "Next: … Previous: … Up: …" line), also when
  all its links lead into the page (a manual made into one page). Texinfo
  numbers its menu entries' access keys 1-9: a menu is not a pager.

A manual page's running header and footer (mandoc's `CP(1) | User Commands |
CP(1)` line above the text and its date and source line below; marked by
mandoc's cell classes, or by the ARIA roles `doc-pageheader` and
`doc-pagefooter` any generator may use) repeat the page's name and the
package's version on every page: they go too, rather than open the first
chunk and close the last.

A "skip to content" link (accessibility: it lets a keyboard jump past the
header) is the same on every page of a site too, and opened each page's first
chunk ("Skip to content" on Node.js's API pages): it goes.

A block with a link into the page (`href="#..."`) is not site navigation:
Sphinx's sidebar holds the page's own table of contents, which reads like a
summary of the page and was measured to help questions find it. Of such a
kept block, a `<div>` whose links all lead elsewhere (Sphinx's "Previous
topic", "Next topic", "This Page") goes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import PreformattedString

_NAVIGATION_CLASSES = frozenset({"navheader", "navfooter"})
_RUNNING_LINE_ROLES = frozenset({"doc-pageheader", "doc-pagefooter"})
# mandoc -Thtml: the cells of a manual's header and footer lines, inside a
# `table` (or, from mandoc 1.14.7, a `div`) of class `head` or `foot`.
_MANUAL_LINE_CELLS = frozenset({"head-ltitle", "head-vol", "head-rtitle", "foot-date", "foot-os"})
_MANUAL_LINES = frozenset({"head", "foot"})
_IN_PAGE_LINK = re.compile(r"^\s*#")
_PAGER_RELS = frozenset({"next", "prev", "previous", "up"})
_PAGER_KEYS = frozenset({"n", "p", "u", "h"})
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_PAGER_BLOCKS = frozenset({"div", "table", "p"})
# The words of a skip link, the whole of its text.
_SKIP_LINK = re.compile(
    r"(?:skip|jump)(?: (?:to|over))?(?: the)?(?: main)? "
    r"(?:content|main|navigation|nav|menu|search|article|page content)(?: links)?",
    re.IGNORECASE,
)
# A pager is a line or a small table of links; a block around one with more
# text than this holds content too, and only the pager inside it goes.
PAGER_MAX_CHARS = 300


@dataclass
class _Inside:
    """What a subtree holds, as far as telling navigation apart needs."""

    chars: int = 0
    link: bool = False
    in_page_link: bool = False
    out_link: bool = False  # a link that leads off the page
    pager_link: bool = False
    heading: bool = False
    manual_line_cell: bool = False

    def add(self, other: _Inside) -> None:
        self.chars += other.chars
        self.link |= other.link
        self.in_page_link |= other.in_page_link
        self.out_link |= other.out_link
        self.pager_link |= other.pager_link
        self.heading |= other.heading
        self.manual_line_cell |= other.manual_line_cell


def drop_skip_links(soup: BeautifulSoup) -> None:
    """Remove links into the page that only say "skip to content", in place."""
    for link in soup.find_all("a", href=_IN_PAGE_LINK):
        if _SKIP_LINK.fullmatch(" ".join(link.get_text(" ").split())):
            link.decompose()


def drop_site_navigation(soup: BeautifulSoup) -> None:
    """Remove the page's site navigation from `soup`, in place.

    Linear in the page: what each subtree holds is summed once, children
    before parents, then the tree is walked once from the top, and a removed
    block is not looked into. (Asking each element about its own subtree
    would be quadratic on a hostile page: 20,000 pager links in one `<div>`.)
    """
    inside = _summaries(soup)
    stack: list[tuple[Tag, bool]] = [(soup, False)]
    while stack:
        tag, in_navigation = stack.pop()
        for child in list(tag.children):
            if not isinstance(child, Tag):
                continue
            held = inside[id(child)]
            if _goes(child, held, in_navigation):
                child.extract()
            else:
                stack.append((child, in_navigation or _marked_navigation(child)))


def _goes(tag: Tag, held: _Inside, in_navigation: bool) -> bool:
    pager = _pager(tag, held)
    if pager and not held.out_link:
        # Before the in-page rule: a one-page manual's pagers lead into the
        # page itself only (Texinfo's `--no-split` editions: bash's reference
        # manual kept 105 "Next: … Previous: … Up: … [Contents][Index]" lines).
        return True
    if held.in_page_link:
        return False  # it holds this page's own table of contents
    if _marked_navigation(tag) or _manual_line(tag, held):
        return True
    if in_navigation and tag.name == "div" and held.link:
        return True  # a part of a kept navigation block that leads elsewhere only
    return pager


def _pager(tag: Tag, held: _Inside) -> bool:
    return (
        tag.name in _PAGER_BLOCKS
        and held.pager_link
        and held.chars <= PAGER_MAX_CHARS
        and not held.heading
    )


def _summaries(soup: BeautifulSoup) -> dict[int, _Inside]:
    """Each element's `_Inside`, by id: descendants in reverse document order
    come before their ancestors, so one pass sums every subtree."""
    inside: dict[int, _Inside] = {}
    for node in reversed(list(soup.descendants)):
        if not isinstance(node, Tag):
            continue
        held = _own(node)
        for child in node.children:
            if isinstance(child, Tag):
                held.add(inside[id(child)])
            elif isinstance(child, NavigableString) and not isinstance(child, PreformattedString):
                held.chars += len(child)  # text, not a comment or a declaration
        inside[id(node)] = held
    return inside


def _own(tag: Tag) -> _Inside:
    href = tag.get("href") if tag.name == "a" else None
    return _Inside(
        link=bool(href),
        in_page_link=bool(href) and _IN_PAGE_LINK.match(str(href)) is not None,
        out_link=bool(href) and _IN_PAGE_LINK.match(str(href)) is None,
        pager_link=bool(href) and _is_pager_link(tag),
        heading=tag.name in _HEADINGS,
        manual_line_cell=not _MANUAL_LINE_CELLS.isdisjoint(_classes(tag)),
    )


def _marked_navigation(tag: Tag) -> bool:
    role = str(tag.get("role") or "").lower()
    if role == "navigation" or role in _RUNNING_LINE_ROLES:
        return True
    return not _NAVIGATION_CLASSES.isdisjoint(_classes(tag))


def _manual_line(tag: Tag, held: _Inside) -> bool:
    """mandoc's header or footer line: a block of class `head` or `foot`
    holding its cells (the class alone is too common a name to go by)."""
    return held.manual_line_cell and not _MANUAL_LINES.isdisjoint(_classes(tag))


def _classes(tag: Tag) -> set[str]:
    return {name.lower() for name in tag.get_attribute_list("class") if name}


def _is_pager_link(tag: Tag) -> bool:
    if tag.name != "a" or not tag.get("href"):
        return False
    rels = {rel.lower() for rel in tag.get_attribute_list("rel") if rel}
    # bs4 reads both as lists of space-separated tokens
    keys = {key.lower() for key in tag.get_attribute_list("accesskey") if key}
    return not keys.isdisjoint(_PAGER_KEYS) or not rels.isdisjoint(_PAGER_RELS)
