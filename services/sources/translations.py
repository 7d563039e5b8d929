"""Which pages of a folder are translations of each other.

Pages that translate each other share a translation key, put on each of them
as `metadata["translation_key"]`, so that a hit can offer the reader the page
in their own language (`translations_of`). Pages are linked, as Hugo links
them, by a key each page has:

- the key its front matter declares (`translation_key`, or Hugo's
  `translationKey`), else
- its path without its locale folder: `en/guide/setup.md` and
  `zh-CN/guide/setup.md` both have `guide/setup.md` (and so does a
  `guide/setup.md` of a site that keeps its default language at the root),
  or without the locale in its file name: `README.en-US.md` has `README.md`,
  as its twin `README.md` does (Hugo's translation by file name).

A declared key replaces the path: a page that declares one is linked only to
pages with the same key (and by `hreflang`), as in Hugo. Pages with the same
key are linked; an HTML page's `<link rel="alternate" hreflang href>` links
it to the page its `href` names, when that page is part of the same load.
Linked pages form one group, whose key is the smallest key declared in it,
else the smallest path key. Keys of different groups never collide, since
every group's key is the own key of one of its members.

Only a page with a translation, or with a declared key, gets the metadata.
A page with translations in other locales also gets them, as
`metadata["translations"]` (`services.core.translation_links`, written by
the directory loader with `others_in_group`), so a hit carries them.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

from services.core.models import Document
from services.core.translation_links import TRANSLATIONS_KEY, Translation

__all__ = [
    "DECLARED_KEY_FIELDS",
    "TRANSLATIONS_KEY",
    "TRANSLATION_KEY",
    "PageLinks",
    "Translation",
    "others_in_group",
    "resolve_href",
    "translation_keys",
    "translations_of",
]

TRANSLATION_KEY = "translation_key"
DECLARED_KEY_FIELDS = ("translation_key", "translationKey")
MAX_KEY_CHARS = 256  # as a front-matter value may be; far under the Indexer's limit


@dataclass(frozen=True)
class PageLinks:
    """What one page says about its translations."""

    relpath: str
    own_key: str  # the declared key, else the path without its locale (folder or name)
    declared: bool
    alternates: tuple[str, ...] = ()  # hreflang hrefs, as written


def translation_keys(pages: Sequence[PageLinks], base_url: str = "") -> dict[str, str]:
    """relpath → translation key, for every page with a translation or a declared key."""
    groups = _Groups(page.relpath for page in pages)
    by_key: dict[str, str] = {}
    known = {page.relpath for page in pages}
    for page in pages:
        groups.join(page.relpath, by_key.setdefault(page.own_key, page.relpath))
        for href in page.alternates:
            if (other := resolve_href(href, page.relpath, base_url, known)) is not None:
                groups.join(page.relpath, other)
    members: dict[str, list[PageLinks]] = defaultdict(list)
    for page in pages:
        members[groups.find(page.relpath)].append(page)
    keys: dict[str, str] = {}
    for group in members.values():
        declared = sorted(p.own_key for p in group if p.declared)
        key = declared[0] if declared else min(p.own_key for p in group)
        keys.update((p.relpath, _bounded(key)) for p in group if len(group) > 1 or p.declared)
    return keys


def others_in_group(group: Iterable[Translation], locale: str) -> tuple[Translation, ...]:
    """A page's translations among its group's members (itself included or
    not): those in another locale, sorted by locale and doc_id."""
    return tuple(sorted(t for t in group if t.locale != locale))


def _bounded(key: str) -> str:
    """A key short enough for any metadata limit: a very long path becomes its digest."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class _Groups:
    """Union-find over relative paths."""

    def __init__(self, items: Iterable[str]) -> None:
        self._parent = {item: item for item in items}

    def find(self, item: str) -> str:
        while (parent := self._parent[item]) != item:
            self._parent[item] = self._parent[parent]  # path halving
            item = parent
        return item

    def join(self, a: str, b: str) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self._parent[max(root_a, root_b)] = min(root_a, root_b)


# ------------------------------------------------------------------ hreflang


def resolve_href(href: str, from_relpath: str, base_url: str, known: set[str]) -> str | None:
    """The relative path of the loaded page an alternate's `href` names, or None.

    A relative href is read from the page's folder; an absolute or
    root-relative one through `base_url` (it must lie under it), or, without
    a base URL, by its path from the folder's root. `dir/` and `dir/page`
    also find `dir/index.html` and `dir/page.html`, as a static site serves them.
    """
    path = _site_path(href, from_relpath, base_url)
    if path is None:
        return None
    return next((c for c in _candidates(path) if c in known), None)


def _site_path(href: str, from_relpath: str, base_url: str) -> str | None:
    parts = urlsplit(href.strip())
    if parts.scheme or parts.netloc or parts.path.startswith("/"):
        if base_url:
            base = base_url if base_url.endswith("/") else base_url + "/"
            absolute = urlsplit(urljoin(base, href.strip()))._replace(query="", fragment="")
            if not absolute.geturl().startswith(base):
                return None
            path = absolute.geturl()[len(base) :]
        elif parts.scheme in ("", "http", "https"):
            path = parts.path.lstrip("/")
        else:
            return None
    elif not parts.path:  # "#part" or "?query": the page itself
        return from_relpath
    else:
        path = posixpath.join(posixpath.dirname(from_relpath), parts.path)
    folder_like = path == "" or path.endswith("/")
    normal = posixpath.normpath(unquote(path) or ".")
    if normal == ".." or normal.startswith(("../", "/")):
        return None
    normal = "" if normal == "." else normal
    return normal + "/" if folder_like and normal else normal


def _candidates(path: str) -> list[str]:
    if path == "" or path.endswith("/"):
        return [path + "index.html", path + "index.htm"]
    return [path, path + ".html", path + "/index.html"]


# ------------------------------------------------------------------ lookup


# (scope_id, doc_id, locale): a document's identity across scopes.
DocumentKey = tuple[str, str, str]


def translations_of(documents: Iterable[Document]) -> dict[DocumentKey, tuple[Translation, ...]]:
    """Each document's translations: the documents of its scope with the same
    `translation_key` and another locale, sorted by locale and doc_id; `()`
    for a document without any. Pure: it reads only the documents given."""
    docs = list(documents)
    groups: dict[tuple[str, str], list[Document]] = defaultdict(list)
    for doc in docs:
        if key := doc.metadata.get(TRANSLATION_KEY):
            groups[(doc.scope_id, key)].append(doc)
    found: dict[DocumentKey, tuple[Translation, ...]] = {}
    for doc in docs:
        key = doc.metadata.get(TRANSLATION_KEY)
        group = groups[(doc.scope_id, key)] if key else []
        members = (Translation(o.locale, o.doc_id, o.url) for o in group)
        found[(doc.scope_id, doc.doc_id, doc.locale)] = others_in_group(members, doc.locale)
    return found
