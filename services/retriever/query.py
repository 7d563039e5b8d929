"""Query normalization: the first step of every Retrieve.

The normalizer only removes noise that carries no meaning (surrounding and
repeated whitespace, invisible control characters, differing Unicode
compositions of the same letter). It never lowercases, stems or strips
punctuation: exact tokens such as `text-embedding-v4`, `chunkSize=800`, `429`,
`v1.2.3` or `C++` are often what makes a lexical match, and both stores apply
their own analysis afterwards.
"""

from __future__ import annotations

import re
import unicodedata

from services.core.errors import ConfigError, InvalidArgument
from services.core.query_text import query_problem

# `\s` on str patterns covers Unicode whitespace: tabs, newlines, NBSP,
# thin/ideographic spaces, line/paragraph separators.
_WHITESPACE_RUN = re.compile(r"\s+")

# Invisible format characters that only ever split a token in two for the
# lexical analyzer (zero-width space, word joiner, BOM, soft hyphen). Zero-width
# (non-)joiners stay: they change how some scripts and emoji are written.
_INVISIBLE_FORMAT_CHARS = frozenset("\u200b\u2060\ufeff\u00ad")
# Tag characters spell ASCII no reader sees but a model reads (hidden
# instructions for the embedder or the Reranker). They are kept only where
# they draw something: an emoji subdivision flag (a black flag, tags, a
# cancel tag), which the first alternative matches whole.
_TAGS = re.compile("(\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f)|[\U000e0000-\U000e007f]")


class QueryNormalizer:
    """Turns raw user text into the query both channels search with.

    `max_chars` bounds the normalized query in code points, so padding with
    whitespace never counts against the caller and cannot sneak past the limit.
    """

    def __init__(self, max_chars: int = 1000) -> None:
        if max_chars < 1:
            raise ConfigError(f"query max_chars must be at least 1, got {max_chars}")
        self.max_chars = max_chars

    def normalize(self, text: str) -> str:
        """Return the cleaned query or raise InvalidArgument saying what is wrong."""
        # Emptiness (and the letter, digit or symbol rule) has one
        # definition, shared with the gateway; it removes more than the
        # cleaning below, so a query that passes is never cleaned into nothing.
        problem = query_problem(text)
        if problem is not None:
            raise InvalidArgument(problem)
        # NFC last: removing an invisible character can bring a letter and its
        # combining accent together, which only then compose.
        cleaned = unicodedata.normalize("NFC", _collapse_whitespace(_strip_invisible(text)))
        if len(cleaned) > self.max_chars:
            raise InvalidArgument(f"query: {len(cleaned)} characters, limit is {self.max_chars}")
        return cleaned


def _strip_invisible(text: str) -> str:
    # Whitespace controls (tab, newline, ...) are kept here so that the next step
    # turns them into a separating space instead of gluing two words together.
    text = _TAGS.sub(lambda m: m.group(1) or "", text)
    return "".join(ch for ch in text if ch.isspace() or not _is_invisible(ch))


def _is_invisible(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc" or ch in _INVISIBLE_FORMAT_CHARS


def _collapse_whitespace(text: str) -> str:
    return _WHITESPACE_RUN.sub(" ", text).strip()
