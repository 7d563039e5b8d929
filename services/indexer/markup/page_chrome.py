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
  (DocBook's tables, Texinfo's "Next: … Previous: … Up: …" line). Texinfo
  numbers its menu entries' access keys 1-9: a menu is not a pager.

A block with a link into the page (`href="#..."`) is not site navigation:
Sphinx's sidebar holds the page's own table of contents, which reads like a
summary of the page and was measured to help questions find it. Of such a
kept block, a `<div>` whose links all lead elsewhere (Sphinx's "Previous
topic", "Next topic", "This Page") goes.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Tag

_NAVIGATION_CLASSES = frozenset({"navheader", "navfooter"})
_IN_PAGE_LINK = re.compile(r"^\s*#")
_PAGER_RELS = frozenset({"next", "prev", "previous", "up"})
_PAGER_KEYS = frozenset({"n", "p", "u", "h"})
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_PAGER_BLOCKS = frozenset({"div", "table", "p"})
# A pager is a line or a small table of links; a block around one with more
# text than this holds content too, and only the pager inside it goes.
PAGER_MAX_CHARS = 300


def drop_site_navigation(soup: BeautifulSoup) -> None:
    """Remove the page's site navigation from `soup`, in place. One pass over
    the page, then a walk up from each pager link: cheaper than asking of
    every element whether it is a pager."""
    for block in soup.find_all(_marked_navigation):
        if block.parent is None:
            continue  # inside a block already removed
        if _leads_elsewhere_only(block):
            block.extract()
            continue
        for part in block.find_all("div"):
            if part.find("a", href=True) is not None and _leads_elsewhere_only(part):
                part.extract()
    for link in soup.find_all(_is_pager_link):
        if (pager := _pager_around(link)) is not None:
            pager.extract()


def _pager_around(link: Tag) -> Tag | None:
    """The largest block around `link` that is a pager: no more than
    PAGER_MAX_CHARS of text, no heading, no link into the page."""
    pager = None
    for block in link.parents:
        if block.name not in _PAGER_BLOCKS:
            continue
        if len(block.get_text()) > PAGER_MAX_CHARS or block.find(_HEADINGS) is not None:
            break
        if not _leads_elsewhere_only(block):
            break
        pager = block
    return pager


def _marked_navigation(tag: Tag) -> bool:
    if tag.get("role") == "navigation":
        return True
    return any(name.lower() in _NAVIGATION_CLASSES for name in tag.get_attribute_list("class"))


def _leads_elsewhere_only(tag: Tag) -> bool:
    return tag.find("a", href=_IN_PAGE_LINK) is None


def _is_pager_link(tag: Tag) -> bool:
    if tag.name != "a" or not tag.get("href"):
        return False
    rels = {rel.lower() for rel in tag.get_attribute_list("rel") if rel}
    # bs4 reads both as lists of space-separated tokens
    keys = {key.lower() for key in tag.get_attribute_list("accesskey") if key}
    return not keys.isdisjoint(_PAGER_KEYS) or not rels.isdisjoint(_PAGER_RELS)
