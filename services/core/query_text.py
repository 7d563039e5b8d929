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

Only emptiness is decided here. A query with visible characters keeps its
invisible ones as they are: the Retriever's normalizer (services.retriever.query)
removes the few that only split words and keeps the joiners that shape scripts
and emoji.
"""

from __future__ import annotations

import regex

# One visible character is enough: `search` stops at the first.
_VISIBLE = regex.compile(r"[^\p{White_Space}\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]")

EMPTY_QUERY = (
    "query is empty (nothing is left after removing whitespace, control, format and "
    "default-ignorable characters)"
)


def is_empty_query(text: str) -> bool:
    """True when `text` holds no character but invisible ones (see above)."""
    return _VISIBLE.search(text) is None
