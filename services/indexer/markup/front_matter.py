"""YAML front matter of Markdown files: cut from the body, read by the loader.

Static-site generators (Jekyll, Hugo, Docusaurus, MkDocs) keep a page's
settings in a `---` block at the very top. A reader never sees it, so it is
no text to index; but its `title` is the title the site shows (better than
the first H1), and its other scalar fields are useful filters, so the
directory loader turns them into the document's title and metadata.

A block only counts as front matter when its first line looks like a YAML
key (`title: ...`): a page that merely opens with a thematic break (`---`)
keeps its text. YAML that does not parse, or parses to something other than
a mapping, is still cut from the body but otherwise ignored: a page's
settings must never make its load fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import yaml

MAX_KEYS = 32
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 256
# Front matter is a few lines; a larger block is not parsed (YAML parsing of
# untrusted text should stay cheap), though it is still cut from the body.
_MAX_YAML_CHARS = 64 * 1024

_BLOCK = re.compile(r"---[ \t]*\n(?P<yaml>(?:.*\n)*?)(?:---|\.\.\.)[ \t]*(?:\n|\Z)")
_YAML_KEY = re.compile(r"""[^\s#:-][^:\n]*:(?:[ \t]|$)|["'][^"'\n]+["'][ \t]*:(?:[ \t]|$)""")


@dataclass(frozen=True)
class FrontMatter:
    """What a page's front matter says: a title (or "") and scalar fields."""

    title: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


def front_matter_end(text: str) -> int:
    """Where the body starts: after the front matter, or 0 when there is none."""
    block = _match(text)
    return block.end() if block else 0


def read_front_matter(text: str) -> tuple[FrontMatter, str]:
    """(the front matter's title and metadata, the text without the block)."""
    block = _match(text)
    if block is None:
        return FrontMatter(), text
    return _parse(block.group("yaml")), text[block.end() :]


def _match(text: str) -> re.Match[str] | None:
    block = _BLOCK.match(text)
    if block is None:
        return None
    lines = (line.strip() for line in block.group("yaml").split("\n"))
    first = next((line for line in lines if line and not line.startswith("#")), "")
    return block if not first or _YAML_KEY.match(first) else None


def _parse(source: str) -> FrontMatter:
    if len(source) > _MAX_YAML_CHARS:
        return FrontMatter()
    try:
        data = yaml.safe_load(source)
    except Exception:
        # Malformed YAML, or values PyYAML cannot build (`date: 2024-02-30`
        # raises ValueError): the block is dropped and the page still loads.
        return FrontMatter()
    if not isinstance(data, dict):
        return FrontMatter()
    title = " ".join(_scalar(data.get("title")).split())
    return FrontMatter(title, _metadata(data))


def _metadata(data: dict[Any, Any]) -> dict[str, str]:
    """Scalar fields other than the title, bounded so that no page's front
    matter can push a document over the Indexer's metadata limits."""
    metadata: dict[str, str] = {}
    for key, value in data.items():
        if len(metadata) >= MAX_KEYS:
            break
        if not isinstance(key, str) or key == "title" or not _usable_key(key):
            continue
        text = _scalar(value)
        if text and len(text) <= MAX_VALUE_CHARS:
            metadata[key] = text
    return metadata


def _usable_key(key: str) -> bool:
    # "=" is refused in metadata keys by validation (it separates filter terms).
    return 0 < len(key) <= MAX_KEY_CHARS and "=" not in key and bool(key.strip())


def _scalar(value: Any) -> str:
    """A string, number, boolean or date as text; lists, maps and null as ""."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value).strip()
    if isinstance(value, date):  # YAML reads `date: 2024-05-01` as a date
        return value.isoformat()
    return ""
