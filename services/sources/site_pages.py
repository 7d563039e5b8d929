"""One page of a site as read: its text as written with what its head declares
(`SitePage`), and what it becomes (`PageBody`: the title, the text to index,
the prose a reader sees). The directory loader (`site_loader`) reads each page
through `read_page` and `page_body`, in its first pass for the page's head and
in full when the page is loaded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.core.field_rules import without_hidden_characters
from services.core.models import ContentType
from services.indexer.chunking import TextSyntax, iter_headings
from services.indexer.markup.front_matter import FrontMatter, read_front_matter
from services.indexer.markup.html_markdown import html_to_markdown
from services.indexer.markup.markdown_text import clean_markdown
from services.sources.compressed_pages import page_bytes
from services.sources.html_head import HtmlHead, read_html_head
from services.sources.locale_detection import normalize_tag
from services.sources.page_formats import text_as_read
from services.sources.site_walk import MAX_FILE_BYTES, SiteFile, read_regular_file
from services.sources.text_files import content_type_for_filename, decode_text, normalize_newlines
from services.sources.translations import DECLARED_KEY_FIELDS

# A plain text's title is at its top: reST gives level 1 to the first style of
# underline it meets, so a changelog's first underlined line, 80,000
# characters in (bash's CHANGES), would be its title. Before it may come a
# mail header or a comment block (git's how-tos: up to 663 characters).
PLAIN_TITLE_WITHIN = 2_000
# A `#` title (not reST's overline of `#`, which is a title's own line).
_ATX_LINE = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)", re.MULTILINE)
_COMMENT_LINE = re.compile(r"#(?:[ \t]|$)", re.MULTILINE)


@dataclass(frozen=True)
class SitePage:
    """A file as read: its text as written, and what its head declares."""

    relpath: str
    content_type: ContentType
    text: str
    modified: float
    front: FrontMatter
    head: HtmlHead

    def declared_locale(self) -> str | None:
        """Front matter `lang`, then `locale`, then `<html lang>`; malformed ones skipped."""
        declared = [self.front.metadata.get("lang", ""), self.front.metadata.get("locale", "")]
        for tag in (*declared, self.head.lang):
            if tag and (normal := normalize_tag(tag)):
                return normal
        return None

    def declared_key(self) -> str:
        return next((v for k in DECLARED_KEY_FIELDS if (v := self.front.metadata.get(k))), "")


@dataclass(frozen=True)
class PageBody:
    """What a page becomes: its title, the text to index, and its prose (what
    a reader sees: the text the title and the script are read from)."""

    title: str
    text: str
    content_type: ContentType
    prose: str

    @property
    def locale_text(self) -> str:
        return f"{self.title}\n\n{self.prose}"


def page_body(page: SitePage) -> PageBody:
    if page.content_type is ContentType.HTML:
        title, text = html_to_markdown(page.text)
        return PageBody(title, text, ContentType.MARKDOWN, text)
    if page.content_type is ContentType.MARKDOWN:
        # The H1 as a reader sees it: not a `#` line of the YAML, no comment in it.
        prose = clean_markdown(read_front_matter(page.text)[1])
        return PageBody(page.front.title or first_h1(prose), page.text, page.content_type, prose)
    # Plain text: reST and AsciiDoc sources name themselves in a top title.
    return PageBody(plain_title(page.text), page.text, page.content_type, page.text)


def read_page(file: SiteFile, fallback_encoding: str) -> SitePage:
    content_type = content_type_for_filename(file.relpath)
    raw, modified = read_regular_file(file.path, file.identity)
    raw = page_bytes(file.relpath, raw, MAX_FILE_BYTES)
    text = normalize_newlines(decode_text(raw, content_type, fallback_encoding))
    text = text_as_read(file.relpath, text)
    is_markdown, is_html = content_type is ContentType.MARKDOWN, content_type is ContentType.HTML
    front = read_front_matter(text)[0] if is_markdown else FrontMatter()
    head = read_html_head(text) if is_html else HtmlHead()
    return SitePage(file.relpath, content_type, text, modified, front, head)


def first_h1(text: str, syntax: TextSyntax = TextSyntax.MARKDOWN) -> str:
    return next((h.title for h in iter_headings(text, syntax) if h.level == 1 and h.title), "")


def plain_title(text: str) -> str:
    """A plain text's title: its first level-1 title if that is at its top
    (`PLAIN_TITLE_WITHIN`); a `#` line only as its first line, since plain
    text writes comments that way too (Debian's changelogs end in `# Older
    entries have been removed from this changelog.`)."""
    found = next((h for h in iter_headings(text, TextSyntax.PLAIN) if h.level == 1), None)
    if found is None or not found.title or found.offset >= PLAIN_TITLE_WITHIN:
        return ""
    if _ATX_LINE.match(text, found.offset) and (
        text[: found.offset].strip() or _COMMENT_LINE.match(text, _next_line(text, found.offset))
    ):
        return ""  # a comment, or the first line of a block of them (`# Copyright …`, `#`)
    return found.title


def _next_line(text: str, offset: int) -> int:
    """Where the first non-blank line after the one at `offset` starts."""
    end = text.find("\n", offset)
    if end < 0:
        return len(text)
    rest = text[end + 1 :]
    return end + 1 + (len(rest) - len(rest.lstrip("\n \t")))


def one_line(title: str) -> str:
    """A title read from a page, made the one-line text the Indexer accepts
    (services.core.field_rules): line breaks folded, invisible characters
    such as a zero-width space or a soft hyphen in a heading dropped, rather
    than the whole page refused for what its author cannot see."""
    return without_hidden_characters(" ".join(title.split()))
