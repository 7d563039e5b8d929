"""Identifier-like tokens and their exact forms.

People search documentation for the strings they copy out of an error or a
config file: `429`, `text-embedding-v4`, `chunkSize=800`, `E1042`,
`client.embeddings.create()`, `XYZ_API_KEY`, `config/indexer.yaml`, `v2.3.1`.
A word analyzer splits and stems them (`text embed v4`), so a page that merely
says "text" and "embedding" competes with the one page that names the model.
Next to the word terms, the index therefore keeps each identifier's *exact
form*: the piece as written, lower-cased (case is not part of what people
remember), with surrounding punctuation (quotes, brackets, sentence stops)
removed.

A piece is a run of characters between whitespace and CJK text. It is an
identifier when it
- mixes letters and digits (`v4`, `E1042`, `X7Q-4291`, `bm25`), or
- is a number of three or more digits, or digits joined by punctuation
  (`429`, `8443`, `2.4.0`), or
- is camelCase (`chunkSize`, `isArray`, `OpenSearch`), or
- joins letters or digits with connector punctuation (`max_tokens`,
  `util.isArray`, `config/indexer.yaml`, `key=value`, `QUOTA_EXCEEDED`), except
  prose: words joined only by slashes (`and/or`), dotted abbreviations (`e.g`,
  `U.S`, `Ph.D`), ordinals and decades (`20th`, `1990s`), and words joined only
  by hyphens unless a part after a hyphen is capitalised (`Content-Type`,
  `Idempotency-Key`, `X-Request-Id` are header names; `long-term`,
  `state-of-the-art`, `T-cell` are prose), or
- is a command-line flag (`--dry-run`), a dotfile (`.env`), an underscore
  name (`__init__`, `_private`) or a `++`/`#` language name (`C++`, `C#`).

A page offers every hyphenated compound as an exact form too, whatever its
case, so a query for `Content-Type` also matches a page that writes
`content-type`; only the query side tells header names from prose.

A document's piece also contributes its identifier-like parts, so a search
for `chunkSize` finds `chunkSize=800`, `embeddings.create` finds
`client.embeddings.create()` and `indexer.yaml` finds `config/indexer.yaml`
(dotted suffixes only from a letter on, so `0.1` never matches
`127.0.0.1`); a query keeps its whole pieces (or, when a piece is no
identifier as a whole, like `~/.bashrc`, its identifier parts), so
`text-embedding-v3` does not match a page about `text-embedding-v4` through
their shared parts. A comma between digits is part of a number (`1,000`).

Whether a chunk holds an identifier is decided by the very function that
indexed it (`document_identifiers`), so the stores' exact-match boost and the
query path always agree, whatever Unicode folding did to the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from services.core.analysis.scripts import CJK, nfkc

MAX_IDENTIFIER_CHARS = 128
MAX_QUERY_IDENTIFIERS = 16

PIECE = re.compile(f"[^\\s{CJK}]+")
# Edge characters that belong to an identifier: a leading `.` (dotfile), `-`
# (flag), `_` (`__init__`), `/` or `~` (paths), `@` (scoped names); a trailing
# `_`, `+` (C++) or `#` (C#). Any other non-alphanumeric edge is punctuation.
_LEAD_KEEP = frozenset("._-/~@")
_TRAIL_KEEP = frozenset("_+#")
_CONNECTOR_BETWEEN = re.compile(r"[^\W_][-_.=/:+#@\\]+[^\W_]")
_CAMEL = re.compile(r"[a-z][A-Z]")
_FLAG = re.compile(r"^--?[^\W\d_]")
# `__init__`, `_private`, `C++`, `C#`: identifier characters at an edge.
_EDGE_MARKED = re.compile(r"^_+[^\W_]|[^\W_](\+\+|#)$")
_DOTFILE = re.compile(r"^\.[^\W_]+$")
# Parts of a piece that stand on their own: `key=value`, `a/b`, `host:port`,
# `@scope/name`, `f(x)`, `[text](target)`.
_STRONG_SPLIT = re.compile(r"(?:[=/:@;|\\()\[\]{}<>\"'`]|,(?!\d)|(?<!\d),)+")
_WEAK_SPLIT = re.compile(r"[-_.+#]+")
_QUERY_SPLIT = re.compile(r"(?:[()\[\]{}<>\"'`;]|,(?!\d)|(?<!\d),)+")
_ABBREVIATION = re.compile(r"^(?:[^\W\d_]{1,2}\.)+[^\W\d_]{1,2}\.?$")
_CAPITALISED_PART = re.compile(r"-[^\W\d_a-z]")
_ORDINAL_OR_DECADE = re.compile(r"^\d+(?:st|nd|rd|th|s)$", re.IGNORECASE)


def _is_alnum(ch: str) -> bool:
    return ch.isalnum()


def strip_edges(piece: str) -> str:
    """`"chunkSize=800",` → `chunkSize=800`; `(see` → `see`; `C++.` → `C++`."""
    start, end = 0, len(piece)
    while start < end and not _is_alnum(piece[start]) and piece[start] not in _LEAD_KEEP:
        start += 1
    while end > start and not _is_alnum(piece[end - 1]) and piece[end - 1] not in _TRAIL_KEEP:
        end -= 1
    return piece[start:end]


def exact_form(piece: str) -> str:
    """How an identifier is indexed and compared: NFKC (full-width → ASCII),
    lower-cased."""
    if not piece.isascii():
        # NFKC can expand a character into several, never into a term break.
        piece = "".join(nfkc(piece).split())
    return piece.lower()


def is_identifier(piece: str) -> bool:
    """Whether an edge-stripped piece is identifier-like (module docstring)."""
    if not 2 <= len(piece) <= MAX_IDENTIFIER_CHARS or not any(map(_is_alnum, piece)):
        return False
    has_alpha = any(ch.isalpha() for ch in piece)
    digits = sum(ch.isdigit() for ch in piece)
    if has_alpha and digits:
        return not _ORDINAL_OR_DECADE.match(piece)
    if not has_alpha:
        return digits >= 3 or bool(digits and _CONNECTOR_BETWEEN.search(piece))
    if _CAMEL.search(piece) or _FLAG.match(piece) or _DOTFILE.match(piece):
        return True
    if _EDGE_MARKED.search(piece):
        return True
    if not _CONNECTOR_BETWEEN.search(piece) or _ABBREVIATION.match(piece):
        return False
    return not _is_prose_compound(piece)


def _is_prose_compound(piece: str) -> bool:
    """`long-term`, `T-cell`, `and/or`: words joined by `/` only, or by `-`
    only with no part after a hyphen capitalised (`Content-Type` is not)."""
    joints = set(re.sub(r"[^\W_]", "", piece))
    if joints == {"/"}:
        return True
    return joints == {"-"} and not _CAPITALISED_PART.search(piece)


def _hyphen_compound(piece: str) -> bool:
    """Words joined by hyphens only (`long-term`, `content-type`)."""
    return "-" in piece and set(re.sub(r"[^\W_]", "", piece)) == {"-"}


@lru_cache(maxsize=65536)
def piece_forms(piece: str) -> frozenset[str]:
    """Every exact form a document piece offers: itself and its parts."""
    piece = strip_edges(piece)
    forms: set[str] = set()
    if is_identifier(piece) or _hyphen_compound(piece):
        forms.add(exact_form(piece))
    parts = [strip_edges(p) for p in _STRONG_SPLIT.split(piece)]
    for part in parts:
        if part and part != piece:
            forms |= piece_forms(part)
    if len(parts) == 1:
        forms |= _weak_parts(piece)
    return frozenset(forms)


def _weak_parts(piece: str) -> set[str]:
    """Dotted suffixes (`embeddings.create`) and self-standing sub-parts
    (`X7Q` and `4291` of `X7Q-4291`, `v4` of `text-embedding-v4`)."""
    forms: set[str] = set()
    for match in re.finditer(r"\.(?=[^\W\d])", piece):
        suffix = strip_edges(piece[match.end() :])
        if is_identifier(suffix):
            forms.add(exact_form(suffix))
    subparts = [p for p in _WEAK_SPLIT.split(piece) if p]
    if len(subparts) > 1:
        forms.update(exact_form(p) for p in subparts if is_identifier(p))
    return forms


def document_identifiers(texts: Iterable[str]) -> list[str]:
    """The exact forms a chunk is indexed with (sorted, unique)."""
    forms: set[str] = set()
    for text in texts:
        for match in PIECE.finditer(text):
            forms |= piece_forms(match.group())
    return sorted(forms)


def query_identifiers(query: str) -> tuple[str, ...]:
    """The identifiers a query asks for: whole pieces only (module docstring)."""
    found: dict[str, None] = {}
    for match in PIECE.finditer(query):
        for part in _QUERY_SPLIT.split(match.group()):
            for form in _query_forms(strip_edges(part)):
                if len(found) < MAX_QUERY_IDENTIFIERS:
                    found.setdefault(form)
    return tuple(found)


def _query_forms(piece: str) -> list[str]:
    if is_identifier(piece):
        return [exact_form(piece)]
    parts = [strip_edges(p) for p in _STRONG_SPLIT.split(piece)]
    return [exact_form(p) for p in parts if p != piece and is_identifier(p)]


@dataclass(frozen=True)
class IdentifierMatch:
    identifier: str
    start: int  # code point offsets into the text searched
    end: int


def held_identifiers(texts: Iterable[str], identifiers: Sequence[str]) -> set[str]:
    """The identifiers among `identifiers` that the texts hold, exactly as
    `document_identifiers` indexed them (a substring test skips the texts that
    cannot hold any, which is nearly all of them)."""
    if not identifiers:
        return set()
    wanted = set(identifiers)
    held: set[str] = set()
    for text in texts:
        folded = _squeezed_text(text)
        if any(identifier in folded for identifier in wanted - held):
            held |= _held_in_pieces(text, wanted)
    return held


# Every candidate of a question with identifiers is tested, on every request
# that finds it, and the pages that answer one question come back for many:
# their folded text is kept (4,096 chunks, a few MB) instead of folded again
# (23 us for 800 characters of Chinese, most of the test).
@lru_cache(maxsize=4096)
def _squeezed_text(text: str) -> str:
    return _squeezed(text)


def _held_in_pieces(text: str, wanted: set[str]) -> set[str]:
    """`wanted & document_identifiers([text])`, computing the forms only of
    the pieces that could offer one: a form is a piece's part, folded and
    without the spaces folding may add, so it is a substring of that. A
    number like `5` matches in most chunks, and the forms of every piece of a
    chunk cost a few times more than this test."""
    held: set[str] = set()
    for match in PIECE.finditer(text):
        piece = match.group()
        folded = _squeezed(piece)
        if any(identifier in folded for identifier in wanted):
            held |= wanted & piece_forms(piece)
    return held


def find_identifiers(text: str, identifiers: Iterable[str]) -> Iterator[IdentifierMatch]:
    """Where `text` holds each identifier: the identifier's own occurrence
    inside each piece that offers it (`429` in `HTTP 429:`), or the whole
    piece when Unicode folding hides it (`４２９`)."""
    wanted = set(identifiers)
    if not wanted:
        return
    folded = _folded(text)
    if not any(identifier in folded for identifier in wanted):
        return
    lowered = lower_same_length(text)
    for match in PIECE.finditer(text):
        for identifier in wanted & piece_forms(match.group()):
            spans = list(_bounded(lowered, identifier, match.start(), match.end()))
            for start in spans or [match.start()]:
                end = start + len(identifier) if spans else match.end()
                yield IdentifierMatch(identifier, start, end)


def _bounded(lowered: str, identifier: str, start: int, end: int) -> Iterator[int]:
    """Occurrences of `identifier` in lowered[start:end] not inside a longer
    run of letters and digits (`429` in `429/4290`, not the one in `4290`)."""
    at = lowered.find(identifier, start, end)
    while at != -1:
        after = at + len(identifier)
        before_ok = at == start or not lowered[at - 1].isalnum() or not identifier[0].isalnum()
        after_ok = after == end or not lowered[after].isalnum() or not identifier[-1].isalnum()
        if before_ok and after_ok:
            yield at
        at = lowered.find(identifier, at + 1, end)


def _squeezed(text: str) -> str:
    """`_folded`, without the spaces NFKC may add inside a piece (`᾽` folds
    to a space and a mark) and `exact_form` removes: every exact form of the
    text is a substring of this."""
    folded = _folded(text)
    return folded if text.isascii() else "".join(folded.split())


def _folded(text: str) -> str:
    """The text as exact forms see it (NFKC, lower-cased), for substring tests."""
    if not text.isascii():
        text = nfkc(text)
    return text.lower()


def lower_same_length(text: str) -> str:
    """`str.lower` keeps offsets except for a few letters (`İ` → `i̇`)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
