"""What a stored URL may be: what a browser follows without running anything.

One rule for every URL the services store and hand back as a link target (a
document's `url`, checked by the Indexer: `services.indexer.document_fields`;
the same shape is expected of the links in a document's translations): empty,
an absolute `http`/`https` URL with a host, or a relative reference (a path,
with an optional `?query` and `#fragment`), resolved against the page that
shows it. Every other scheme is refused (`javascript:`, `data:`, `file:`,
`vbscript:`, ...), and so are the shapes a browser reads differently from the
way they look: control characters (tab and newline are dropped by browsers),
leading or trailing whitespace (stripped, so `" javascript:..."` would run), a
backslash (read as `/` in http(s) URLs), and a scheme-relative `//host/...`
(another site, named without a scheme).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import regex

from services.core.field_rules import CONTROL_CHARACTERS

# RFC 3986 scheme, then ":". A relative path whose first segment holds a
# colon reads as a scheme too (RFC 3986 §4.2), and is refused as one.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_WEB_SCHEMES = frozenset({"http", "https"})

# Scripts whose letters pass for each other (а/a, ο/o, р/p, ...).
_CONFUSABLE_SCRIPTS = {
    name: regex.compile(rf"\p{{Script={name}}}") for name in ("Latin", "Cyrillic", "Greek")
}

WEB_URL_RULE = "an absolute http(s) URL or a relative path"


def web_url_problem(url: str) -> str | None:
    """None when `url` follows the rule above, else what is wrong with it."""
    if not url:
        return None
    identity = url_identity_problem(url)
    if identity is not None:
        return identity
    if url != url.strip():
        return "starts or ends with whitespace"
    if "\\" in url:
        return "contains a backslash"
    scheme = _SCHEME.match(url)
    if scheme is not None:
        return _absolute_problem(url, scheme.group(1).lower())
    if url.startswith("//"):
        return "a scheme-relative URL (//host) is not allowed"
    return None


def _absolute_problem(url: str, scheme: str) -> str | None:
    if scheme not in _WEB_SCHEMES:
        return f"scheme {scheme!r} is not allowed"
    try:
        host = urlsplit(url).hostname
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        return f"not a valid URL ({exc})"
    return None if host else f"an absolute {scheme} URL needs a host"


def url_identity_problem(url: str) -> str | None:
    """None when `url` names where it leads plainly (no control characters,
    no credentials, no host label mixing confusable scripts), else why not."""
    if CONTROL_CHARACTERS.search(url):
        return "contains control characters"
    # The authority: after "//" (with or without a scheme) up to the path.
    authority = url.partition("//")[2] if _authority_follows(url) else ""
    authority = re.split(r"[/?#]", authority, maxsplit=1)[0]
    if "@" in authority:
        return "contains credentials (user:password@ before the host)"
    for label in _host(authority).split("."):
        scripts = _scripts_of(label)
        if len(scripts) > 1:
            return f"host label {label!r} mixes {' and '.join(sorted(scripts))} letters"
    return None


def _host(authority: str) -> str:
    """The host of an authority without credentials ("" for an IPv6 literal)."""
    if authority.startswith("["):
        return ""
    return authority.rpartition(":")[0] if ":" in authority else authority


def _authority_follows(url: str) -> bool:
    scheme = _SCHEME.match(url)
    rest = url[scheme.end() :] if scheme is not None else url
    return rest.startswith("//")


def _scripts_of(label: str) -> set[str]:
    """The confusable scripts among `label`'s letters (a punycode label decoded)."""
    if label.lower().startswith("xn--"):
        try:
            label = label[4:].encode("ascii").decode("punycode")
        except (UnicodeError, ValueError):
            return set()  # not decodable: no letters to compare (DNS refuses it anyway)
    return {name for name, script in _CONFUSABLE_SCRIPTS.items() if script.search(label)}
