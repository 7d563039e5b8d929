"""A document's body as the chunker reads it: the server's normalisation of
what arrives over the API (or from a loader).

HTML is turned into Markdown-ish text, so the chunker sees headings,
paragraphs, lists, code fences and tables in one syntax; a Markdown body is
reduced to what a reader sees (`markup.markdown_text`) when the Indexer's
`RAG_CLEAN_MARKDOWN` says so. Plain text is never cleaned: `<b>` in it is text.
"""

from __future__ import annotations

from services.core.models import ContentType, Document
from services.indexer.heading_syntax import TextSyntax
from services.indexer.markup.html_markdown import html_to_markdown
from services.indexer.markup.markdown_text import clean_markdown


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalize_body(doc: Document, *, clean: bool = True) -> str:
    """The Markdown or plain text to chunk for a document."""
    if doc.content_type is ContentType.HTML:
        return html_to_markdown(doc.text)[1]
    text = normalize_newlines(doc.text)
    return clean_markdown(text) if clean and doc.content_type is ContentType.MARKDOWN else text


def body_syntax(doc: Document) -> TextSyntax:
    """How the normalised body marks its titles: HTML arrives as Markdown."""
    return TextSyntax.PLAIN if doc.content_type is ContentType.TEXT else TextSyntax.MARKDOWN
