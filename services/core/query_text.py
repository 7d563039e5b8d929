"""The one definition of an empty query, for every way a query comes in (the
gateway's JSON, the Retriever's and the Reranker's RPCs).

A query is empty when nothing is left after removing every character that
shows nothing and means nothing on its own: whitespace (`White_Space`: spaces
of every width including U+3000, tabs, line breaks), control characters
(`Cc`: NUL, escape, ...), format characters (`Cf`: zero-width space and
joiners, bidi marks, invisible math operators such as U+2061, the BOM, ...)
and Unicode's default-ignorable code points (`Default_Ignorable_Code_Point`:
variation selectors such as U+FE0F, Hangul fillers, musical formatting
characters such as U+1D173, tags, ...).

Such a query has no term for the lexical channel, and the vector channel would
embed it anyway and return its nearest chunks: arbitrary hits for nothing.

A query that shows something must also *say* something: at least one letter,
digit or symbol (`L`, `N`, `S`: `429`, `chunkSize=800`, `中文`, `+`, `€`,
an emoji), as the Retrieve contract says. Combining marks alone (`"\u0301"`),
punctuation alone (`"..."`, `"?!"`) and the braille blank U+2800 (a symbol
by category, drawn as nothing) give the lexical channel no term either, and
the vector channel the same arbitrary hits: `query_problem` refuses them.

Only emptiness and that rule are decided here. A query with visible characters keeps its
invisible ones as they are: the Retriever's normalizer (services.retriever.query)
removes the few that only split words and keeps the joiners that shape scripts
and emoji.
"""

from __future__ import annotations

import regex

# One visible character is enough: `search` stops at the first.
_VISIBLE = regex.compile(r"[^\p{White_Space}\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]")

# Letters, digits and symbols that show something (not U+3164-style fillers).
_TERM = regex.compile(r"[[\p{L}\p{N}\p{S}]--[\p{Default_Ignorable_Code_Point}\u2800]]", regex.V1)
# What makes a chunk of a page worth indexing: a letter or digit, or a
# symbol beyond ASCII (emoji, ✅, →, ∀, €). ASCII symbols (`|`, `=`, `+`, `` ` ``,
# `~`, `<`) are what markup leaves behind: a span of a table rule or a code
# fence alone is no content.
_CONTENT = regex.compile(
    r"[\p{L}\p{N}]|[[\p{S}]--[\x00-\x7f\p{Default_Ignorable_Code_Point}\u2800]]", regex.V1
)

EMPTY_QUERY = (
    "query: is empty (nothing is left after removing whitespace, control, format and "
    "default-ignorable characters)"
)


def shows_nothing(text: str) -> bool:
    """True when `text` holds no character but invisible ones (see above): an
    empty query, and an empty document body (services.indexer.validation)."""
    return _VISIBLE.search(text) is None


def holds_content(text: str) -> bool:
    """True when `text` holds a letter, a digit or a symbol beyond ASCII
    (see _CONTENT): the spans of a page the Indexer keeps."""
    return _CONTENT.search(text) is not None


def is_empty_query(text: str) -> bool:
    return shows_nothing(text)


NO_TERM_QUERY = (
    "query: has no letter, digit or symbol (only punctuation, combining marks or blank characters)"
)


def query_problem(text: str) -> str | None:
    """None when `text` is a query by the rules above, else which one it breaks."""
    if is_empty_query(text):
        return EMPTY_QUERY
    if _TERM.search(text) is None:
        return NO_TERM_QUERY
    return None
