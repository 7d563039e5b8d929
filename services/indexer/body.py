"""A document's body as the chunker reads it: the server's normalisation of
what arrives over the API (or from a loader).

HTML is turned into Markdown-ish text, so the chunker sees headings,
paragraphs, lists, code fences and tables in one syntax; a Markdown body is
reduced to what a reader sees (`markup.markdown_text`) when the Indexer's
`RAG_CLEAN_MARKDOWN` says so. Plain text is never cleaned: `<b>` in it is text.
"""

from __future__ import annotations

import re

from services.core.models import ContentType, Document
from services.indexer.heading_syntax import TextSyntax
from services.indexer.markup.html_markdown import html_to_markdown
from services.indexer.markup.markdown_text import clean_markdown

# A byte order mark decoded as text: the folder loaders drop it when they
# decode, but a body sent over the API may still open with one, and in front
# of front matter or a heading it hides them ("\ufeff---" is no fence).
BOM = "\ufeff"
# How a saved web page opens: white space and comments, then the doctype or
# the root element. Read from the first few KB only.
_HTML_OPENING = re.compile(r"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)[\s>]", re.I | re.S)
_SNIFF_CHARS = 4096


def guess_content_type(text: str) -> ContentType:
    """What CONTENT_TYPE_UNSPECIFIED means: HTML when the body opens as an
    HTML document (`<!doctype html>` or `<html>`), else Markdown. A Markdown
    page may hold HTML blocks, so only the document's opening decides."""
    opening = text[:_SNIFF_CHARS].removeprefix(BOM)
    return ContentType.HTML if _HTML_OPENING.match(opening) else ContentType.MARKDOWN


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalize_body(doc: Document, *, clean: bool = True) -> str:
    """The Markdown or plain text to chunk for a document."""
    if doc.content_type is ContentType.HTML:
        return html_to_markdown(doc.text.removeprefix(BOM))[1]
    text = normalize_newlines(doc.text.removeprefix(BOM))
    return clean_markdown(text) if clean and doc.content_type is ContentType.MARKDOWN else text


def body_syntax(doc: Document) -> TextSyntax:
    """How the normalised body marks its titles: HTML arrives as Markdown."""
    return TextSyntax.PLAIN if doc.content_type is ContentType.TEXT else TextSyntax.MARKDOWN
