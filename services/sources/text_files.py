"""Files as text: which suffixes are read, how bytes are decoded, and how a
failure to read is described to the operator (shared by the loaders)."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from services.core.errors import InvalidArgument
from services.core.models import ContentType
from services.indexer.body import normalize_newlines as normalize_newlines

_SUFFIX_TYPES = {
    ".md": ContentType.MARKDOWN,
    ".markdown": ContentType.MARKDOWN,
    ".html": ContentType.HTML,
    ".htm": ContentType.HTML,
    ".txt": ContentType.TEXT,
    # reStructuredText and AsciiDoc sources are read as plain text, whose
    # titles the chunker reads in both (services.indexer.heading_syntax).
    ".rst": ContentType.TEXT,
    ".adoc": ContentType.TEXT,
    ".asciidoc": ContentType.TEXT,
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-]+)""", re.I)


def content_type_for_filename(name: str) -> ContentType:
    """The content type a file name's suffix implies; other suffixes are rejected."""
    content_type = _SUFFIX_TYPES.get(Path(name).suffix.lower())
    if content_type is None:
        supported = ", ".join(sorted(_SUFFIX_TYPES))
        raise InvalidArgument(f"unsupported file type {name!r}: expected one of {supported}")
    return content_type


def is_supported_name(name: str) -> bool:
    return Path(name).suffix.lower() in _SUFFIX_TYPES


def decode_text(raw: bytes, content_type: ContentType) -> str:
    """UTF-8 unless a byte-order mark (or, for HTML, a <meta charset>) says otherwise."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            return raw.decode(encoding)
    if content_type is ContentType.HTML and (declared := _META_CHARSET.search(raw[:4096])):
        return raw.decode(declared.group(1).decode("ascii"))
    return raw.decode("utf-8")


def describe_error(exc: Exception) -> str:
    """An operator's reason for a read or decode failure."""
    if isinstance(exc, UnicodeDecodeError):
        return f"cannot decode as {exc.encoding} at byte {exc.start}: {exc.reason}"
    if isinstance(exc, LookupError):
        return f"unknown declared charset: {exc}"
    return f"cannot read: {exc}"
