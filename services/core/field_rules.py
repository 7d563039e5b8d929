"""The shape rules every service applies to the same kinds of field, so the
Indexer, the Retriever and the Gateway refuse the same values.

**One-line text** (a document's title, metadata keys and values, boost keys
and values, filter values): no control character (`Cc`: NUL, escape, tab,
newline, DEL, C1), no line or paragraph separator, and no format character
(`Cf`) except those that real words need: the zero-width (non-)joiners
U+200C/U+200D (Persian and Indic words, emoji sequences), the implicit
direction marks U+200E/U+200F/U+061C (numbers inside Arabic or Hebrew text),
and the prepended concatenation marks (the Arabic number sign U+0600, ...:
visible). Refused, for example: the bidi embeddings, overrides and isolates
U+202A–U+202E, U+2066–U+2069 (`"abc\\u202etxt.exe"` shows as
`abcexe.txt`), the zero-width space U+200B, word joiner, BOM, invisible math
operators and tag characters (text hidden from a reader but read by a model).
Metadata *values* (and the filter and boost values compared with them) are
the same but may hold tabs and line breaks (`\t`, `\n`, `\r`): front matter
values can span lines. Document *bodies* are not one-line text: they keep newlines, tabs and every
format character (they are indexed as written).

**Language tags** (a document's locale, a filter's locale, a query's
language): well-formed BCP 47 (RFC 5646 §2.1 `langtag`): a primary language
subtag of 2–3 letters, written in lower case (the index compares locales by
equality), then optional extlang, script, region, variant, extension and
private-use subtags; at most 35 characters. `en`, `zh-CN`, `zh-Hant-TW`,
`sr-Latn-RS`, `de-CH-1996`, `en-US-x-twain`.

**Times** (a document's `updated_at`, a recency boost's `origin`): RFC 3339
§5.6: a date-time with a time offset, or (where a date is enough) a
full-date. `datetime.fromisoformat` alone is not the rule: it accepts other
ISO 8601 shapes and ignores a trailing NUL.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime

import regex

MAX_LANGUAGE_TAG_CHARS = 35  # RFC 5646 §4.4.1 asks implementations for 35
# A document's metadata value (the Indexer) and so what a filter or boost
# compares with one (the Retriever, the Gateway): a longer one matches nothing.
MAX_METADATA_VALUE_CHARS = 1024
# A boost's weight lies in (0, MAX_BOOST_WEIGHT]: the Retriever and the Gateway both check it.
MAX_BOOST_WEIGHT = 10.0
MAX_BOOST_DAYS = 36_500.0  # a recency scale or offset: beyond a century it is a mistake
# A tenant, site or collection name (the Indexer's rule; so a filter on any
# other name could only match nothing): letters, digits and `._-:/`.
MAX_SCOPE_ID_CHARS = 128
_SCOPE_ID = re.compile(r"[A-Za-z0-9._:/-]+")

# C0 and C1 controls and the Unicode line and paragraph separators: what a
# one-line value (an id, a URL, a metadata key) must not hold, and what a
# report printed to a terminal escapes.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Cc, the separators, and Cf less the characters real words need (above).
_HIDDEN = regex.compile(
    r"[[\p{Cc}\p{Cf}\u2028\u2029]--[\u200c-\u200f\u061c\p{Prepended_Concatenation_Mark}]]",
    regex.V1,
)
_BREAKS_AS_SPACES = str.maketrans("\t\n\r", "   ")
_LANGUAGE_TAG = re.compile(
    r"[a-z]{2,3}"  # primary language (ISO 639), lower case
    r"(?:-[A-Za-z]{3}){0,3}"  # extlang
    r"(?:-[A-Za-z]{4})?"  # script (ISO 15924)
    r"(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"  # region (ISO 3166 or UN M.49)
    r"(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*"  # variants
    r"(?:-[0-9A-WY-Za-wy-z](?:-[A-Za-z0-9]{2,8})+)*"  # extensions
    r"(?:-[xX](?:-[A-Za-z0-9]{1,8})+)?",  # private use
    re.ASCII,
)
LANGUAGE_TAG_RULE = (
    "a BCP 47 language tag such as 'en', 'zh-CN' or 'zh-Hant-TW' (language subtag in lower case)"
)
# RFC 3339 §5.6 date-time: full-date "T" partial-time time-offset ("T" and
# "Z" in either case, §5.6 NOTE), fractions bounded (nanoseconds); or the
# full-date alone (only where `date_only` allows it).
_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[Tt](\d{2}:\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2}))?",
    re.ASCII,  # `\d` is 0-9 only
)


def scope_id_problem(scope_id: str) -> str | None:
    """None when a document may belong to `scope_id` (not empty), else why not."""
    if not _SCOPE_ID.fullmatch(scope_id):
        return "may hold only letters, digits and . _ - : / (the scope of no document)"
    return None


def metadata_key_problem(key: str) -> str | None:
    """None when `key` can be a document's metadata key (one-line text, not
    blank, no `=`: keys are stored as `key=value` terms), else why not. A
    filter or boost on any other key could only match nothing."""
    if not key.strip() or "=" in key:
        return "must be non-empty and contain no '=' (no document can hold such a key)"
    return hidden_character_problem(key)


def hidden_character_problem(value: str, *, line_breaks: bool = False) -> str | None:
    """None when `value` is one-line text by the rule above (with
    `line_breaks`: a metadata value's), else which character it holds (by
    code point and name, never the character itself)."""
    found = _HIDDEN.search(value.translate(_BREAKS_AS_SPACES) if line_breaks else value)
    if found is None:
        return None
    char = found.group()
    kind = "control" if unicodedata.category(char) == "Cc" else "format"
    name = unicodedata.name(char, "")
    named = f" ({name})" if name else ""
    return f"contains the {kind} character U+{ord(char):04X}{named}"


def without_hidden_characters(value: str) -> str:
    """`value` with the characters the rule refuses removed (for text a loader
    derives, such as a title read from a page, rather than text a caller gave)."""
    return _HIDDEN.sub("", value)


def language_tag_problem(tag: str) -> str | None:
    """None when `tag` is a language tag by the rule above, else why not."""
    if len(tag) > MAX_LANGUAGE_TAG_CHARS:
        return f"{len(tag)} characters, limit is {MAX_LANGUAGE_TAG_CHARS}"
    if _LANGUAGE_TAG.fullmatch(tag) is None:  # fullmatch: `$` would let "en\n" through
        shown = tag if len(tag) <= 40 else tag[:40] + "..."
        return f"{shown!r} is not {LANGUAGE_TAG_RULE}"
    return None


def canonical_language_tag(tag: str) -> str:
    """A well-formed tag in canonical case (`pt-br` → `pt-BR`), else `tag` as
    it came, for validation to refuse. Case after the language subtag is
    free on input, but tags are stored and compared as strings: `zh-cn`
    beside `zh-CN` was a second locale, a Sync sending one removed the
    other, and a filter on one missed the other. Every service reads a tag
    through this first."""
    return canonical_tag_case(tag) if language_tag_problem(tag) is None else tag


def canonical_tag_case(tag: str) -> str:
    """`tag` in the case BCP 47 recommends: `zh-cn` → `zh-CN`, `zh-hans` →
    `zh-Hans`, `EN` → `en`; after a singleton (an extension or private use)
    everything in lower case."""
    primary, *rest = tag.split("-")
    parts, in_extension = [primary.lower()], False
    for subtag in rest:
        in_extension = in_extension or len(subtag) == 1
        if not in_extension and len(subtag) == 4 and subtag.isalpha():
            parts.append(subtag.title())  # script: Hans, Latn
        elif not in_extension and len(subtag) == 2 and subtag.isalpha():
            parts.append(subtag.upper())  # region: CN, US
        else:
            parts.append(subtag.lower())  # extlang, numeric region (419), variants
    return "-".join(parts)


def parse_rfc3339(value: str, *, date_only: bool = False) -> datetime | None:
    """The instant `value` names (RFC 3339 date-time with an offset; with
    `date_only`, a full-date too, as a naive midnight), or None when it is not
    one or names a date or time that does not exist (2024-02-30, 25:00, an
    offset beyond ±23:59). A leap second (:60) reads as :59."""
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return None
    date, hour_minute, second, fraction, offset = match.groups()
    if offset is None:
        return _iso(date) if date_only else None
    offset = "+00:00" if offset in ("Z", "z") else offset
    second = "59" if second == "60" else second
    return _iso(f"{date}T{hour_minute}:{second}{(fraction or '')[:7]}{offset}")


def _iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
