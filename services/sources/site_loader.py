"""The directory loader: a folder of pages (a site) as Documents.

It walks the folder without leaving it (`site_walk`), reads every page
(`site_pages`) twice: first only its head (front matter, `<html lang>`,
hreflang links) to link translations across the whole folder
(`translations`), then in full, one page at a time, so memory holds the
heads, never the folder's text. Each page gets its own locale
(`_SiteLoad.page_locale`, `locale_detection`).

A page linked to pages in other locales also gets each one's locale, URL
and doc id, as `metadata["translations"]` (`services.core.translation_links`),
so that a search hit can offer the reader's language. The first pass keeps
each page's locale as far as its head and path tell it (`--locale`, front
matter, `<html lang>`, locale folder); a member of a translation group whose
locale only the script of its text can tell is read once more, for that text,
after the groups are known: a page without translations never is.

A page the folder holds in two renderings (HTML beside its Markdown or its
reST source) is loaded once (`renderings`); the others are skipped, by name.
So is an example application's template named `.html` (`template_sources`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from services.core.errors import NotFound
from services.core.models import ContentType, Document
from services.core.translation_links import encode_translations
from services.indexer.validation import DocumentLimits
from services.sources.aggregates import ListedFile, single_page_editions
from services.sources.compressed_pages import page_size
from services.sources.locale_detection import PathLocales, normalize_tag, script_locale
from services.sources.page_formats import empty_page_note
from services.sources.renderings import PageWords, other_renderings, visible_html_text, words
from services.sources.site_pages import PageBody, SitePage, one_line, page_body, read_page
from services.sources.site_walk import LoadError, SiteFile, walk_site
from services.sources.template_sources import template_markup, template_note
from services.sources.text_files import (
    CONVENTIONAL_UNDECODED_NOTE,
    conventional_text_note,
    describe_error,
    is_named_by_convention,
    is_supported_name,
    name_as_title,
)
from services.sources.translations import (
    TRANSLATION_KEY,
    TRANSLATIONS_KEY,
    PageLinks,
    Translation,
    others_in_group,
    translation_keys,
)

_log = logging.getLogger(__name__)

# The Indexer's limit on one metadata value: `metadata["translations"]` keeps
# as many translations as fit in it.
MAX_TRANSLATIONS_CHARS = DocumentLimits().max_metadata_value_chars
# The option of `ingest` / `release-check` that sets `fallback_encoding`, named
# in the reason a file that is not UTF-8 is rejected with.
FALLBACK_ENCODING_OPTION = "--fallback-encoding"


def load_directory(
    root: Path,
    *,
    scope_id: str,
    locale: str = "",
    default_locale: str = "en",
    base_url: str = "",
    follow_symlinks: bool = False,
    max_translations_chars: int = MAX_TRANSLATIONS_CHARS,
    all_renderings: bool = False,
    fallback_encoding: str = "",
    id_prefix: str = "",
) -> Iterator[Document | LoadError]:
    """Every .md/.markdown/.mdx/.html/.htm/.txt/.rst/.adoc/.asciidoc file,
    every manual page (`ls.1`: `manual_pages`), Info manual (`sed.info`:
    `info_files`) and plain text named by convention (`README`,
    `changelog.Debian`: `text_files`) under `root`, in sorted path order,
    each also as `.gz` (`compressed_pages`).

    Hidden files and folders (name starting with ".") are skipped; symbolic
    links are skipped, or with `follow_symlinks` followed only inside the
    root (`site_walk`), each with a LoadError. HTML is converted to Markdown
    here, so the Document's content_type is MARKDOWN. A Markdown file's YAML
    front matter gives its title (over the first H1) and metadata (its other
    scalar fields, bounded; `path` stays the file's).

    A non-empty `locale` is every page's locale; otherwise each page has its
    own (`_SiteLoad.page_locale`), `default_locale` when nothing tells.
    Translations share `metadata["translation_key"]` (`translations`), and
    each page with translations in other locales lists them, sorted by
    locale, in `metadata["translations"]` (compact JSON, at most
    `max_translations_chars` characters: when they do not all fit, as many
    as fit are kept and the page is logged as a warning). A front matter's
    own `translations` field is dropped: the loader writes that key.

    A page in several renderings is loaded once (`renderings`): each other
    rendering comes as a skipped LoadError naming the file kept, unless
    `all_renderings`.

    A file is UTF-8 unless a byte-order mark or an HTML `<meta charset>` says
    otherwise; one that is not valid UTF-8 is read in `fallback_encoding` (a
    web encoding, e.g. gb18030 for legacy Chinese text, as a browser set for
    that language falls back), or reported when none is given.

    A page's doc_id is `id_prefix` and its path under `root` (ids are unique
    across scopes: two sites' `index.html` need prefixes to be two pages).
    """
    if not root.is_dir():
        raise NotFound(f"document folder {str(root)!r} does not exist")
    listing = walk_site(root, wanted=is_supported_name, follow_symlinks=follow_symlinks)
    files = [item for item in listing if isinstance(item, SiteFile)]
    site = _SiteLoad(
        scope_id=scope_id,
        locale=(normalize_tag(locale) or locale) if locale else "",
        default_locale=default_locale,
        base_url=base_url,
        folders=PathLocales(f.relpath for f in files),
        max_translations_chars=max_translations_chars,
        fallback_encoding=fallback_encoding,
        id_prefix=id_prefix,
    )
    skip = {} if all_renderings else _skipped_renderings(files, site)
    site.link_translations([f for f in files if f.relpath not in skip])
    for item in listing:
        if isinstance(item, LoadError):
            yield item
            continue
        if item.relpath in skip:
            yield LoadError(item.relpath, skip[item.relpath], skipped=True)
            continue
        try:
            page = read_page(item, fallback_encoding)
            body = page_body(page)
        except (OSError, UnicodeError, LookupError) as exc:
            yield _unread(item.relpath, exc, fallback_encoding)
            continue
        if note := conventional_text_note(item.relpath, page.text):
            yield LoadError(item.relpath, note, skipped=True)
        elif page.content_type is ContentType.HTML and (
            tags := template_markup(body.title, body.text)
        ):
            yield LoadError(item.relpath, template_note(tags), skipped=True)
        elif note := empty_page_note(item.relpath, body.text):
            yield LoadError(item.relpath, note, skipped=True)
        else:
            yield site.document(page, body)


def _unread(relpath: str, exc: Exception, fallback_encoding: str) -> LoadError:
    """A file that could not be read; one read as text only by its name that
    is not text in the encoding asked for is left out by rule, not failed: it
    may be binary, and a failure would keep `ingest --sync` from removing
    anything, run after run."""
    if (
        isinstance(exc, UnicodeError)
        and is_named_by_convention(relpath)
        and not _cut_inside_a_character(exc)
    ):
        return LoadError(relpath, CONVENTIONAL_UNDECODED_NOTE, skipped=True)
    return LoadError(relpath, _reason(exc, fallback_encoding))


def _cut_inside_a_character(exc: Exception) -> bool:
    """UTF-8 up to its last bytes, which begin a character they do not end:
    a save caught half-written (unread, so --sync removes nothing), not a
    file in another encoding, which fails earlier or shows no UTF-8
    character before its end."""
    if not isinstance(exc, UnicodeDecodeError) or exc.reason != "unexpected end of data":
        return False
    return any(byte >= 0x80 for byte in exc.object[: exc.start])


def _reason(exc: Exception, fallback_encoding: str) -> str:
    reason = describe_error(exc)
    if isinstance(exc, UnicodeDecodeError) and not fallback_encoding:
        reason += f" (a file in a legacy encoding is read with {FALLBACK_ENCODING_OPTION})"
    return reason


def _glances(
    files: list[SiteFile], fallback_encoding: str
) -> Callable[[str], tuple[SitePage, PageBody] | None]:
    """A file and what a reader sees of it, cheaply, for comparing files
    before the load (None: unreadable, the load reports it). HTML by its
    visible text alone: converting it costs several times reading it, and a
    page kept is converted again when it is loaded."""
    file_of = {f.relpath: f for f in files}

    def read(relpath: str) -> tuple[SitePage, PageBody] | None:
        try:
            page = read_page(file_of[relpath], fallback_encoding)
        except (OSError, UnicodeError, LookupError):
            return None
        if page.content_type is ContentType.HTML:
            visible = visible_html_text(page.text)
            return page, PageBody("", visible, ContentType.MARKDOWN, visible)
        return page, page_body(page)

    return read


def _skipped_renderings(files: list[SiteFile], site: _SiteLoad) -> dict[str, str]:
    """Each file left out as another rendering of a page (`renderings`) or a
    single-page edition of the folder's pages (`aggregates`) → why."""
    glance = _glances(files, site.fallback_encoding)

    def words_of(relpath: str) -> PageWords | None:
        if (seen := glance(relpath)) is None:
            return None
        page, body = seen
        return PageWords(site.page_locale(page, body.locale_text), words(body.prose))

    def text_of(relpath: str) -> str | None:
        seen = glance(relpath)
        return seen[1].prose if seen is not None else None

    others = other_renderings([f.relpath for f in files], words_of)
    skip = {
        relpath: f"the same page as {kept}, which is indexed in its place "
        "(--all-renderings indexes both)"
        for relpath, kept in others.items()
    }
    rest = [ListedFile(f.relpath, _size(f)) for f in files if f.relpath not in skip]
    for relpath, held in single_page_editions(rest, text_of).items():
        skip[relpath] = (
            f"a single-page edition of {held} or more other pages of its folder, which are "
            "indexed (--all-renderings indexes it too)"
        )
    return skip


def _size(file: SiteFile) -> int:
    try:
        return page_size(file.path)  # a compressed page's own size: editions are compared by it
    except OSError:
        return 0  # the load reports it


@dataclass
class _SiteLoad:
    scope_id: str
    locale: str
    default_locale: str
    base_url: str
    folders: PathLocales
    max_translations_chars: int = MAX_TRANSLATIONS_CHARS
    fallback_encoding: str = ""
    id_prefix: str = ""
    keys: dict[str, str] = field(default_factory=dict)
    # translation key → its members (locale, doc_id, url), for groups of two or more
    groups: dict[str, tuple[Translation, ...]] = field(default_factory=dict)

    def link_translations(self, files: list[SiteFile]) -> None:
        """A first pass over the files: only their heads (and the locale they
        tell) are kept, so memory stays small; a file that cannot be read is
        reported by the second, and linked here by its path alone."""
        pages: list[PageLinks] = []
        head_locales: dict[str, str | None] = {}
        for file in files:
            try:
                page = read_page(file, self.fallback_encoding)
            except (OSError, UnicodeDecodeError, LookupError):
                # Linked by what needs no read (its path, its folder's or
                # name's locale): its indexed version stays (the Sync is
                # skipped) and names its partners, which must keep naming it.
                key = self.folders.neutral_path(file.relpath)
                pages.append(PageLinks(file.relpath, key, False, ()))
                head_locales[file.relpath] = self.locale or self.folders.locale_of(file.relpath)
                continue
            declared = page.declared_key()
            own_key = declared or self.folders.neutral_path(page.relpath)
            alternates = tuple(a.href for a in page.head.alternates)
            pages.append(PageLinks(page.relpath, own_key, bool(declared), alternates))
            head_locales[page.relpath] = self.head_locale(page)
        self.keys = translation_keys(pages, self.base_url)
        self.groups = self._group_members(files, head_locales)

    def _group_members(
        self, files: list[SiteFile], head_locales: dict[str, str | None]
    ) -> dict[str, tuple[Translation, ...]]:
        by_key: dict[str, list[str]] = defaultdict(list)
        for relpath, key in self.keys.items():
            by_key[key].append(relpath)
        file_of = {f.relpath: f for f in files}
        groups: dict[str, tuple[Translation, ...]] = {}
        for key, relpaths in by_key.items():
            if len(relpaths) < 2:
                continue
            members = []
            for relpath in sorted(relpaths):
                locale = head_locales[relpath] or self._text_locale(file_of[relpath])
                if locale:
                    members.append(
                        Translation(locale, self.id_prefix + relpath, self.page_url(relpath))
                    )
            groups[key] = tuple(members)
        return groups

    def _text_locale(self, file: SiteFile) -> str | None:
        """The locale of a page its head does not tell: its text is read again."""
        try:
            page = read_page(file, self.fallback_encoding)
        except (OSError, UnicodeDecodeError, LookupError):
            return None  # the second pass reports it
        return self.page_locale(page, page_body(page).locale_text)

    def document(self, page: SitePage, body: PageBody) -> Document:
        # Front matter is read from Markdown only (empty otherwise); `path` and
        # `translations` are the loader's own.
        metadata = {**page.front.metadata, "path": page.relpath}
        metadata.pop(TRANSLATIONS_KEY, None)
        locale = self.page_locale(page, body.locale_text)
        if key := self.keys.get(page.relpath):
            metadata[TRANSLATION_KEY] = key
            if translations := self._translations(page.relpath, key, locale):
                metadata[TRANSLATIONS_KEY] = translations
        return Document(
            doc_id=self.id_prefix + page.relpath,
            text=body.text,
            url=self.page_url(page.relpath),
            title=one_line(body.title) or one_line(name_as_title(page.relpath)),
            locale=locale,
            scope_id=self.scope_id,
            metadata=metadata,
            content_type=body.content_type,
            updated_at=datetime.fromtimestamp(page.modified, tz=UTC).isoformat(timespec="seconds"),
        )

    def _translations(self, relpath: str, key: str, locale: str) -> str:
        """`metadata["translations"]` of a page: its group's pages in other
        locales, as many as fit (a warning names the page when some do not)."""
        others = others_in_group(self.groups.get(key, ()), locale)
        value, left_out = encode_translations(others, self.max_translations_chars)
        if left_out:
            _log.warning(
                "%s: %d of %d translations left out of metadata %r (at most %d characters)",
                relpath,
                left_out,
                len(others),
                TRANSLATIONS_KEY,
                self.max_translations_chars,
            )
        return value

    def page_url(self, relpath: str) -> str:
        # Without a base URL, a path relative to the site root (a `file:` URL
        # would be refused: a url is http(s) or relative, docs/security.md).
        return self.base_url + quote(relpath) if self.base_url else quote(relpath)

    def head_locale(self, page: SitePage) -> str | None:
        """What tells a page's locale before its text: the operator's locale,
        the page's declared one (front matter, `<html lang>`), its locale folder
        or file name (`README.en-US.md`)."""
        return self.locale or page.declared_locale() or self.folders.locale_of(page.relpath)

    def page_locale(self, page: SitePage, prose: str) -> str:
        """The first that answers: `head_locale`, the script of its prose, the default."""
        return self.head_locale(page) or script_locale(prose) or self.default_locale
