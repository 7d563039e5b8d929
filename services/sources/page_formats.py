"""The formats the folder loader reads by converting their text first, by
file name: MDX pages to the Markdown a reader sees (`mdx_pages`), manual
pages from roff (`manual_pages`), GNU Info manuals to their nodes' text
(`info_files`), the last two without control characters; and why a page of
one of them that shows nothing is left out."""

from __future__ import annotations

import re

from services.sources.compressed_pages import page_name
from services.sources.info_files import INFO_INDEX_NOTE, info_as_text, is_info_name
from services.sources.manual_pages import (
    MANUAL_ALIAS_NOTE,
    is_manual_page_name,
    is_roff,
    manual_page_markdown,
)
from services.sources.mdx_pages import MDX_SUFFIX, mdx_as_markdown

# Control characters the source of a manual page or an Info manual may hold
# where a reader sees nothing (a catman page's backspaces, a stray NUL, a
# reader's marker the Info reader left): gone, rather than the page refused.
_UNSHOWN_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def text_as_read(relpath: str, text: str) -> str:
    """A file's text as the loader reads it: converted where its name says
    it is one of these formats, else as written."""
    if page_name(relpath).lower().endswith(MDX_SUFFIX):
        return mdx_as_markdown(text)
    if is_manual_page_name(relpath):
        # A file named like a page that holds no roff (a rotated `changelog.1.gz`)
        # shows nothing as a page: it is skipped, as before pages were read.
        return _UNSHOWN_CONTROLS.sub("", manual_page_markdown(text)) if is_roff(text) else ""
    if is_info_name(relpath):
        return _UNSHOWN_CONTROLS.sub("", info_as_text(text))
    return text


def empty_page_note(relpath: str, text: str) -> str | None:
    """Why a converted page without text is skipped (a manual page that is
    an alias, a split Info manual's index file); None: it is not skipped."""
    if text.strip():
        return None
    if is_manual_page_name(relpath):
        return MANUAL_ALIAS_NOTE
    if is_info_name(relpath):
        return INFO_INDEX_NOTE
    return None
