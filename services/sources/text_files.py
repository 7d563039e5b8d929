"""Files as text: which suffixes are read, how bytes are decoded, and how a
failure to read is described to the operator (shared by the loaders)."""

from __future__ import annotations

import codecs
import mimetypes
import re
from pathlib import Path
from typing import Literal

from services.core.errors import InvalidArgument
from services.core.models import ContentType
from services.indexer.body import normalize_newlines as normalize_newlines
from services.sources.compressed_pages import COMPRESSED_SUFFIX, page_name
from services.sources.info_files import is_info_name
from services.sources.manual_pages import is_manual_page_name

_SUFFIX_TYPES = {
    ".md": ContentType.MARKDOWN,
    ".markdown": ContentType.MARKDOWN,
    # MDX: Markdown with JavaScript, read as the Markdown a reader sees
    # (services.sources.mdx_pages).
    ".mdx": ContentType.MARKDOWN,
    ".html": ContentType.HTML,
    ".htm": ContentType.HTML,
    ".txt": ContentType.TEXT,
    # reStructuredText and AsciiDoc sources are read as plain text, whose
    # titles the chunker reads in both (services.indexer.heading_syntax).
    ".rst": ContentType.TEXT,
    ".adoc": ContentType.TEXT,
    ".asciidoc": ContentType.TEXT,
}
# Plain-text files named by convention rather than by a suffix, as source
# releases and Debian's /usr/share/doc/<package> ship them: `README`, `NEWS.gz`,
# `FAQ`, `LICENSE-MIT`, `README.Debian`, `changelog.Debian.amd64.gz`,
# `COPYING.LIB`, `README.zh_CN`. A tail is read too, unless it ends in a suffix
# of another format (`license.js`, `INSTALL.sh`, `todo.py`, `Install.pm`,
# `NEWS.xz`): Python's own table of types (not the machine's), and the code,
# data and archive suffixes it lacks. What such a file holds is checked too
# (`conventional_text_note`): a script or binary data is no document.
_CONVENTIONAL_NAME = re.compile(
    r"(?:readme|news|faq|intro|changes|changelog|history|release[-_]?notes|todo|authors"
    r"|contributors|credits|thanks|maintainers|install|hacking|contributing|bugs|notes"
    r"|usage|upgrading|security|copying|license|licence|copyright|notice)"
    r"(?:[-_][A-Za-z0-9+]+)*(?:\.[A-Za-z0-9][A-Za-z0-9_+-]*)*",
    re.IGNORECASE,
)
_KNOWN_TYPES = mimetypes.MimeTypes()
_OTHER_FORMATS = frozenset(
    [
        ".7z", ".ac", ".am", ".asm", ".awk", ".bash", ".bat", ".bib", ".bz2", ".cc", ".cfg",
        ".cjs", ".class", ".clj", ".cmake", ".cmd", ".coffee", ".conf", ".cpp", ".cs", ".cxx",
        ".dat", ".db", ".deb", ".dmg", ".egg", ".el", ".elc", ".gem", ".go", ".gradle", ".graphql",
        ".hpp", ".hs", ".img", ".ini", ".iso", ".jar", ".java", ".json5", ".jsonc", ".jsx", ".kt",
        ".less", ".lock", ".lua", ".lz", ".lzma", ".m4", ".map", ".mjs", ".mk", ".mo", ".npy",
        ".npz", ".otf", ".php", ".pickle", ".pkl", ".pm", ".po", ".properties", ".proto", ".ps1",
        ".pyi", ".rb", ".rpm", ".rs", ".sass", ".scala", ".scss", ".sh", ".snap", ".sql",
        ".sqlite", ".sty", ".svelte", ".swift", ".toml", ".ts", ".tsx", ".ttf", ".vim", ".vue",
        ".whl", ".woff", ".woff2", ".xs", ".xz", ".yaml", ".yml", ".zsh", ".zst",
    ]
)  # fmt: skip
_ReadBy = Literal["suffix", "manual page", "info", "convention"]
_NOT_TEXT_NOTE = "named like a plain-text document, but {what}: left out"
CONVENTIONAL_UNDECODED_NOTE = _NOT_TEXT_NOTE.format(
    what="not UTF-8 (one in a legacy encoding is read with --fallback-encoding)"
)
_SNIFF_CHARS = 8192
# Control characters no text holds (a form feed, an escape in a coloured log do).
_BINARY_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# The Encoding Standard's encodings that Python decodes (WHATWG, "Encodings"),
# by Python's codec name.
_WEB_ENCODINGS = frozenset(
    codecs.lookup(label).name
    for label in (
        "utf-8", "utf-16-le", "utf-16-be", "utf-16", "ascii", "latin-1", "ibm866",
        # 9 and 11 are labels of windows-1254 and windows-874 there (so is
        # tis-620); their own codecs differ from those only in C1 controls.
        *(f"iso-8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
        "tis-620",
        "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874",
        *(f"cp{n}" for n in range(1250, 1259)),
        "gbk", "gb2312", "gb18030", "big5", "big5hkscs", "euc-jp", "iso-2022-jp",
        "shift_jis", "cp932", "euc-kr", "cp949",
    )
)  # fmt: skip
# `[^<>]`: a run of `<meta` is not rescanned to its end from each one.
_META_CHARSET = re.compile(rb"""<meta[^<>]+charset\s*=\s*["']?([A-Za-z0-9_\-]+)""", re.I)


def content_type_for_filename(name: str) -> ContentType:
    """The content type a file name's suffix implies (after a `.gz`, the
    page's: `README.md.gz` is Markdown; a manual page's roff, `ls.1`, is read
    as Markdown: services.sources.manual_pages); other suffixes are rejected."""
    found = _reading_by_name(name)
    if found is None:
        supported = ", ".join(sorted(_SUFFIX_TYPES))
        raise InvalidArgument(
            f"unsupported file type {name!r}: expected one of {supported}, a manual page, "
            "an Info manual or a plain-text file named by convention (README, NEWS, ...), "
            f"each also gzip-compressed, ending in {COMPRESSED_SUFFIX}"
        )
    return found[0]


def is_supported_name(name: str) -> bool:
    return _reading_by_name(name) is not None


def is_named_by_convention(name: str) -> bool:
    """Whether a file is read as text by its conventional name alone (no
    suffix of a format read, no manual page or Info manual name)."""
    found = _reading_by_name(name)
    return found is not None and found[1] == "convention"


def _reading_by_name(name: str) -> tuple[ContentType, _ReadBy] | None:
    """How a file is read, by its name, and why, in this order: a format's
    suffix, a manual page's name, an Info manual's, a conventional name."""
    if content_type := _SUFFIX_TYPES.get(Path(page_name(name)).suffix.lower()):
        return content_type, "suffix"
    if is_manual_page_name(name):
        return ContentType.MARKDOWN, "manual page"
    if is_info_name(name):
        return ContentType.TEXT, "info"  # services.sources.info_files
    if is_conventional_text_name(name):
        return ContentType.TEXT, "convention"
    return None


def is_conventional_text_name(name: str) -> bool:
    """`README`, `NEWS.Debian.gz`, `LICENSE-MIT`: text by its name (above)."""
    page = Path(page_name(name)).name
    suffix = Path(page).suffix.lower()
    return bool(_CONVENTIONAL_NAME.fullmatch(page)) and (
        not suffix
        or (suffix not in _OTHER_FORMATS and _KNOWN_TYPES.guess_type(page, strict=False)[0] is None)
    )


def conventional_text_note(name: str, text: str) -> str | None:
    """Why a file read as text only by its conventional name is left out: it
    holds a script (`install-sh`) or binary data; None when it is text."""
    if not is_named_by_convention(name):
        return None
    head = text[:_SNIFF_CHARS]
    if head.startswith("#!"):
        return _NOT_TEXT_NOTE.format(what="a script")
    if "\x00" in head or len(_BINARY_CONTROLS.findall(head)) > len(head) // 100:
        return _NOT_TEXT_NOTE.format(what="binary data")
    return None


def name_as_title(name: str) -> str:
    """A page's title when its text names none: the file name without its
    format's suffix (`guide.md` → `guide`, `ls.1` → `ls`), whole when it is
    named by convention (`README.Debian`)."""
    page = Path(page_name(name)).name
    return page if is_named_by_convention(name) else Path(page).stem


def decode_text(raw: bytes, content_type: ContentType, fallback: str = "") -> str:
    """UTF-8 unless a byte-order mark (or, for HTML, a <meta charset>) says
    otherwise; text that is not valid UTF-8 in `fallback` (a web encoding)
    when one is given. UTF-8 is tried first because valid UTF-8 is almost
    never legacy text by accident, so a folder mixing both reads right."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            return raw.decode(encoding)
    if content_type is ContentType.HTML and (declared := _META_CHARSET.search(raw[:4096])):
        encoding = web_encoding(declared.group(1).decode("ascii"))
        # As the HTML standard's prescan says: a `<meta>` read as ASCII bytes
        # cannot be UTF-16 text, so a UTF-16 label there means UTF-8.
        return raw.decode("utf-8" if encoding.startswith("utf-16") else encoding)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if not fallback:
            raise
    return raw.decode(web_encoding(fallback))


def web_encoding(label: str) -> str:
    """The codec of a page's declared charset, if it is one of the Encoding
    Standard's text encodings (what a browser would decode the page with);
    else LookupError. Python's other codecs are not page encodings, and some
    fail or cost quadratic time on crafted bytes (`undefined`, `punycode`,
    `unicode_escape`, ...)."""
    name = codecs.lookup(label).name  # LookupError for an unknown label
    if name not in _WEB_ENCODINGS:
        raise LookupError(f"{label!r} is not a web page encoding")
    return name


def describe_error(exc: Exception) -> str:
    """An operator's reason for a read or decode failure."""
    if isinstance(exc, UnicodeDecodeError):
        return f"cannot decode as {exc.encoding} at byte {exc.start}: {exc.reason}"
    if isinstance(exc, LookupError):
        return f"unknown declared charset: {exc}"
    if isinstance(exc, UnicodeError):
        return f"cannot decode: {exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot read: {exc.strerror}"  # the path is the error's source already
    return f"cannot read: {exc}"
