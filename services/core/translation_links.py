"""A page's translations, as its metadata carries them to a search hit.

A document that has the same page in other languages holds them in
`metadata["translations"]`: compact JSON, a list of objects

    [{"locale":"zh-CN","url":"https://example.com/zh-CN/setup.html","doc_id":"zh-CN/setup.md"}]

sorted by locale (then doc id). The folder loader writes it for every page
it links (`services.sources.translations`); a caller that upserts documents
itself may write the same key. It is ordinary metadata: bounded by the
Indexer's metadata value limit, and a change of it alone is a metadata-only
update (no chunk is re-embedded).

The Retriever reads it back for each hit (`decode_translations`) and never
fails on it: a value that is not such a list carries no translations, and an
entry without a language tag, or whose URL is not an absolute http(s) URL or
a relative path (the rule the Indexer applies to a document's own `url`,
`services.indexer.document_fields`), is left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import NamedTuple

from services.core.field_rules import CONTROL_CHARACTERS
from services.core.web_url import web_url_problem

TRANSLATIONS_KEY = "translations"

# What one decoded value may hold at most; a larger value is no loader's.
MAX_TRANSLATIONS = 64
_MAX_VALUE_CHARS = 100_000
_MAX_LOCALE_CHARS = 35
_MAX_URL_CHARS = 2048
_MAX_DOC_ID_CHARS = 4096

_LOCALE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*")


class Translation(NamedTuple):
    """The same page in another language (field order is the sort order)."""

    locale: str
    doc_id: str
    url: str


def is_web_url(url: str) -> bool:
    """A non-empty URL a browser follows without running anything: absolute
    http(s) with a host, or a relative path; never with surrounding
    whitespace, a backslash, a control character or as `//host`. The same
    rule as the Indexer's `check_web_url` for a document's `url`
    (`services.core.web_url`: no credentials, no mixed-script host either)."""
    return bool(url) and web_url_problem(url) is None


def _entry(t: Translation) -> str:
    fields = {"locale": t.locale, "url": t.url, "doc_id": t.doc_id}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def encode_translations(translations: Iterable[Translation], max_chars: int) -> tuple[str, int]:
    """(the metadata value, how many translations did not fit in it).

    Sorted by locale, then doc id; entries are kept in that order while the
    whole value stays within `max_chars`, and an entry that would not fit is
    left out (so one very long URL does not push out the rest). An entry
    the Retriever would not carry (no locale, or a URL that is not a web
    URL, `is_web_url`) is skipped and not counted. "" when nothing is kept.
    """
    kept: list[str] = []
    size = 2  # "[" and "]"
    left_out = 0
    for t in sorted(set(translations)):
        if not (t.locale and is_web_url(t.url)):
            continue
        entry = _entry(t)
        cost = len(entry) + (1 if kept else 0)
        if size + cost > max_chars:
            left_out += 1
            continue
        kept.append(entry)
        size += cost
    return ("[" + ",".join(kept) + "]" if kept else ""), left_out


def decode_translations(value: str) -> tuple[Translation, ...]:
    """The translations a metadata value holds, as written (in its order);
    `()` for anything that is not a JSON list of such objects. Never raises."""
    if not value or len(value) > _MAX_VALUE_CHARS:
        return ()
    try:
        items = json.loads(value)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(items, list):
        return ()
    found: list[Translation] = []
    for item in items:
        if len(found) == MAX_TRANSLATIONS:
            break
        if (t := _translation(item)) is not None and t not in found:
            found.append(t)
    return tuple(found)


def _translation(item: object) -> Translation | None:
    if not isinstance(item, dict):
        return None
    locale, url, doc_id = item.get("locale"), item.get("url"), item.get("doc_id", "")
    if not (isinstance(locale, str) and isinstance(url, str) and isinstance(doc_id, str)):
        return None
    if len(locale) > _MAX_LOCALE_CHARS or not _LOCALE.fullmatch(locale):
        return None
    if len(url) > _MAX_URL_CHARS or not is_web_url(url):
        return None
    if len(doc_id) > _MAX_DOC_ID_CHARS or CONTROL_CHARACTERS.search(doc_id):
        return None
    return Translation(locale, doc_id, url)
