"""The options that name a source and how it is read: `ingest` and
`release-check` read the same source the same way. Each is checked here, as
the Indexer would check it, before anything is read or sent."""

from __future__ import annotations

import argparse
import os

from services.core.errors import InvalidArgument
from services.core.web_url import WEB_URL_RULE, web_url_problem
from services.indexer.validation import DocumentLimits, check_new_doc_id, check_scope_id
from services.sources.locale_detection import normalize_tag
from services.sources.site_loader import FALLBACK_ENCODING_OPTION
from services.sources.text_files import web_encoding

DEFAULT_LOCALE = "en"
# Half of the Indexer's default doc_id limit: the rest is the page's path.
MAX_ID_PREFIX_CHARS = 256
_DOCUMENT_CHARS_ENV = "RAG_MAX_DOCUMENT_CHARS"


def add_source_options(p: argparse.ArgumentParser) -> None:
    """What `ingest` and `release-check` read: the same source, the same way."""
    p.add_argument("path")
    p.add_argument("--scope", required=True, type=_scope_id, help="scope_id of every document")
    p.add_argument(
        "--locale",
        type=_locale_tag,
        default="",
        help="locale of every document, over anything a page says (e.g. en, zh-CN). "
        "Without it a folder's page takes its own: front matter lang/locale, <html lang>, "
        "a locale folder in its path (en/, zh-CN/), else the script of its text, else "
        f"{DEFAULT_LOCALE}; a BEIR file is {DEFAULT_LOCALE}",
    )
    p.add_argument(
        "--base-url",
        type=_base_url,
        default="",
        help=f"URL prefix for directory documents ({WEB_URL_RULE})",
    )
    p.add_argument(
        "--id-prefix",
        type=_id_prefix,
        default="",
        metavar="PREFIX",
        help="put PREFIX before every document id (a page's id is its path in the folder): "
        "ids are unique across scopes, so two sites ingested as two scopes need one each "
        "(e.g. sqlite/ and jinja/) to keep both index.html pages",
    )
    p.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="follow symbolic links in the folder (skipped by default), "
        "only to files and folders inside it",
    )
    p.add_argument(
        "--all-renderings",
        action="store_true",
        help="index every file of a page the folder holds in several renderings "
        "(x.html beside x.md or its source x.rst.txt) and single-page editions of its pages "
        "(all.html); by default a page is indexed once, from its Markdown, else its HTML, "
        "and the others are reported as skipped",
    )
    p.add_argument(
        FALLBACK_ENCODING_OPTION,
        type=_web_encoding,
        default="",
        metavar="ENCODING",
        help="read a folder's files that are not UTF-8 (and name no charset) in ENCODING, "
        "e.g. gb18030 or big5 for legacy Chinese text, shift_jis, windows-1252; "
        "without it they are reported and left out",
    )
    p.add_argument("--format", choices=["auto", "dir", "beir"], default="auto")
    p.add_argument(
        "--title-as-heading",
        action="store_true",
        help="BEIR: also put the title into the body as a Markdown H1, so it is embedded",
    )
    p.add_argument(
        "--batch",
        type=_positive_int,
        default=64,
        help="documents per request; each request is one all-or-nothing run",
    )
    p.add_argument(
        "--batch-chars", type=_positive_int, default=4_000_000, help="characters per request"
    )
    p.add_argument(
        "--max-document-chars",
        type=_positive_int,
        default=None,
        help="longest body sent; a longer one is rejected here. Default: "
        "RAG_MAX_DOCUMENT_CHARS from the environment, as the Indexer reads it, else "
        f"{DocumentLimits().max_document_chars}",
    )


def _positive_int(value: str | int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive number")
    return number


def max_document_chars_from_env() -> int:
    """RAG_MAX_DOCUMENT_CHARS as the Indexer reads it, else its default; a bad
    value is named as the variable it is, not as an argument never typed."""
    value = os.environ.get(_DOCUMENT_CHARS_ENV)
    if value is None:
        return DocumentLimits().max_document_chars
    try:
        return _positive_int(value)
    except argparse.ArgumentTypeError as exc:
        raise InvalidArgument(f"{_DOCUMENT_CHARS_ENV} in the environment: {exc}") from None


def _scope_id(value: str) -> str:
    """`--scope` checked as the Indexer checks it, before anything is read or sent."""
    try:
        check_scope_id("--scope", value, DocumentLimits())
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _base_url(value: str) -> str:
    """`--base-url` checked as the Indexer checks a page's url, before
    anything is read: else every page was refused in turn (exit status 1)."""
    if problem := web_url_problem(value):
        raise argparse.ArgumentTypeError(f"{problem}: {WEB_URL_RULE}")
    return value


def _id_prefix(value: str) -> str:
    """`--id-prefix`: text a document id may begin with (one line, no white
    space at either end), at most `MAX_ID_PREFIX_CHARS` characters."""
    if len(value) > MAX_ID_PREFIX_CHARS:
        raise argparse.ArgumentTypeError(
            f"{len(value)} characters, at most {MAX_ID_PREFIX_CHARS} (a page's path follows it)"
        )
    try:
        check_new_doc_id("--id-prefix", value)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--id-prefix: ")) from None
    return value


def _web_encoding(value: str) -> str:
    """`--fallback-encoding`: one of the web's text encodings, as its codec name; "": none."""
    if not value:
        return ""
    try:
        return web_encoding(value)
    except LookupError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a web page encoding (e.g. gb18030, big5, shift_jis, windows-1252)"
        ) from None


def _locale_tag(value: str) -> str:
    """`--locale` in the one spelling the index uses (`zh_cn` → `zh-CN`); "": none."""
    if not value:
        return ""
    tag = normalize_tag(value)
    if tag is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a language tag like 'en' or 'zh-CN'")
    return tag
