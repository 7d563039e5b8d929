"""Document loaders and body normalisation for the Indexer.

Loaders stream `LoadedItem`s: either a `Document` or a `LoadError` naming the
file (and line) that could not be read and why. A bad file or line never stops
a load, so a CLI can report every failure and index everything else; only a
missing root/file raises (`NotFound`), since then nothing can be loaded.

HTML is turned into Markdown-ish text once, at load time or in
`normalize_body`, so the chunker sees headings, paragraphs, lists, code
fences and tables in one syntax. `normalize_body` also reduces a Markdown
body to what a reader sees (`markdown_text`), on the server, for files and
for documents sent over the API alike; the directory loader reads a page's
front matter into its title and metadata but leaves its text as written,
so that the Indexer's `RAG_CLEAN_MARKDOWN` alone decides what is indexed.

The directory loader lives in `site_loader` (folder walk in `site_walk`,
locales in `locale_detection`, translations in `translations`) and is
re-exported here with `LoadError` and `content_type_for_filename`.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.core.errors import InvalidArgument, NotFound
from services.core.models import ContentType, Document
from services.indexer.body import normalize_body
from services.indexer.markup.html_markdown import html_to_markdown
from services.sources.compressed_pages import is_compressed
from services.sources.site_loader import load_directory
from services.sources.site_walk import MAX_FILE_BYTES, LoadError
from services.sources.text_files import (
    content_type_for_filename,
    describe_error,
)

__all__ = [
    "LoadError",
    "LoadedItem",
    "content_type_for_filename",
    "html_to_markdown",
    "load_beir_jsonl",
    "load_directory",
    "load_jsonl_documents",
    "normalize_body",
]


LoadedItem = Document | LoadError
# The longest JSON line read: a document's whole record, as large as a page
# file may be.
MAX_LINE_BYTES = MAX_FILE_BYTES


# ------------------------------------------------------------------ JSON lines


def load_beir_jsonl(
    path: Path, *, scope_id: str, locale: str = "en", title_as_heading: bool = False
) -> Iterator[LoadedItem]:
    """A BEIR corpus (`{"_id", "title", "text", "metadata"?}` per line), streamed.

    The title stays in `title` (the lexical store indexes it; the body is the
    abstract only); `url` is empty because BEIR documents have no address.

    `title_as_heading` also makes the title part of the content, as a Markdown
    H1 above the abstract (`# Title\n\nabstract`): the chunks then carry it as
    their heading path and the vectors embed it. The embedder never sees the
    `title` field itself (a title change must stay a metadata-only update), so
    for corpora whose titles say what a document is about, such as BEIR's,
    this is how the title reaches the vector channel. A title change then
    changes the content and re-embeds the document.
    """
    for source, record in _iter_json_records(path):
        if isinstance(record, LoadError):
            yield record
            continue
        try:
            yield _beir_document(record, scope_id, locale, title_as_heading)
        except InvalidArgument as exc:
            yield LoadError(source, str(exc))


def _beir_document(
    record: dict[str, Any], scope_id: str, locale: str, title_as_heading: bool
) -> Document:
    title, text = _optional_str(record, "title"), _optional_str(record, "text")
    heading = " ".join(title.split())  # a heading is one line
    as_heading = title_as_heading and bool(heading)
    return Document(
        doc_id=_required_id(record, "_id"),
        text=f"# {heading}\n\n{text}" if as_heading else text,
        title=title,
        locale=locale,
        scope_id=scope_id,
        metadata=_string_map(record.get("metadata")),
        content_type=ContentType.MARKDOWN if as_heading else ContentType.TEXT,
    )


def load_jsonl_documents(
    path: Path, *, scope_id: str = "", locale: str = "en"
) -> Iterator[LoadedItem]:
    """Our own JSON-lines format: one object a line with the fields of `Document`.

    `doc_id` and `text` are required; a record's own `scope_id`/`locale` win
    over the arguments, which are defaults.
    """
    for source, record in _iter_json_records(path):
        if isinstance(record, LoadError):
            yield record
            continue
        try:
            yield _document_from_record(record, scope_id=scope_id, locale=locale)
        except InvalidArgument as exc:
            yield LoadError(source, str(exc))


def _document_from_record(record: dict[str, Any], *, scope_id: str, locale: str) -> Document:
    content_type = _optional_str(record, "content_type") or ContentType.MARKDOWN.value
    try:
        parsed_type = ContentType(content_type)
    except ValueError:
        raise InvalidArgument(f"unknown content_type {content_type!r}") from None
    if not isinstance(record.get("text"), str):
        raise InvalidArgument("field 'text' is required and must be a string")
    return Document(
        doc_id=_required_id(record, "doc_id"),
        text=record["text"],
        url=_optional_str(record, "url"),
        title=_optional_str(record, "title"),
        locale=_optional_str(record, "locale") or locale,
        scope_id=_optional_str(record, "scope_id") or scope_id,
        metadata=_string_map(record.get("metadata")),
        content_type=parsed_type,
        updated_at=_optional_str(record, "updated_at"),
    )


def _iter_json_records(path: Path) -> Iterator[tuple[str, dict[str, Any] | LoadError]]:
    """(source, object) per non-blank line; a line that is not a JSON object
    becomes a LoadError. Lines are decoded one by one so a bad byte costs one line."""
    if not path.is_file():
        raise NotFound(f"JSON-lines file {str(path)!r} does not exist")
    for number, raw in _numbered_lines(path):
        source = f"{path.name}:{number}"
        if isinstance(raw, LoadError):  # a line too long, or the end of what could be read
            yield source, raw
            continue
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            if not line.strip():
                continue
            record = json.loads(line)
        except UnicodeDecodeError as exc:
            yield source, LoadError(source, describe_error(exc))
            continue
        except json.JSONDecodeError as exc:
            yield source, LoadError(source, f"not valid JSON: {exc}")
            continue
        except RecursionError:
            yield source, LoadError(source, "not valid JSON: nested too deeply")
            continue
        if not isinstance(record, dict):
            yield source, LoadError(source, "not a JSON object")
            continue
        yield source, record


def _numbered_lines(path: Path) -> Iterator[tuple[int, bytes | LoadError]]:
    """The file's lines from 1, gunzipped as they are read when its name ends
    in .gz (BEIR corpora ship as `corpus.jsonl.gz`); a read that fails part
    way (a truncated or corrupt file) ends the lines with a LoadError. A line
    longer than MAX_LINE_BYTES is a LoadError of its own, read past without
    being held: a few KB of gzip can hold one line of gigabytes."""
    number = 0
    with (gzip.open if is_compressed(path.name) else open)(path, "rb") as lines:
        try:
            while raw := lines.readline(MAX_LINE_BYTES + 1):
                number += 1
                if len(raw) <= MAX_LINE_BYTES:
                    yield number, raw
                    continue
                while not raw.endswith(b"\n") and (raw := lines.readline(MAX_LINE_BYTES)):
                    pass  # the rest of the long line, dropped as it is read
                reason = f"a line over {MAX_LINE_BYTES} bytes, the limit; not read"
                yield number, LoadError(f"{path.name}:{number}", reason)
        except (OSError, EOFError, zlib.error) as exc:
            reason = f"cannot read past line {number}: {exc}"
            yield number + 1, LoadError(f"{path.name}:{number + 1}", reason)


def _required_id(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"field {key!r} is required and must be a non-empty string")
    return value


def _optional_str(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"field {key!r} must be a string")
    return value


def _string_map(value: Any) -> dict[str, str]:
    """Metadata as a string map: non-string values are JSON-encoded."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument("field 'metadata' must be an object")
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
        for k, v in value.items()
    }
