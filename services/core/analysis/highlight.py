"""Where a query matched inside a hit's text, for highlighting and citations.

A span covers a word whose term is one of the query's terms (the same
analysis as the index, so `embeddings` lights up for a query `embedding`), an
occurrence of a CJK query term (a Chinese word or bigram), or an occurrence
of one of the query's exact identifiers. Overlapping or touching spans merge;
a merged span is an identifier span when any part of it was one.

Cost matters here (every hit of every response): instead of analysing the
whole text, a substring search (in C) finds where a term could start, and only
the word there is analysed. A stem drops or changes at most the last letters
of a word, so a word whose term is `t` starts with `t` minus its last letter.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from services.core.analysis.analyzer import WORD, QueryPlan, TextAnalyzer
from services.core.analysis.identifiers import find_identifiers, lower_same_length
from services.core.analysis.scripts import CJK_RUN
from services.core.analysis.stopwords import is_stopword


@dataclass(frozen=True)
class MatchSpan:
    start: int  # code points, end exclusive
    end: int
    identifier: bool = False


def match_spans(analyzer: TextAnalyzer, text: str, plan: QueryPlan) -> list[MatchSpan]:
    """Sorted, non-overlapping spans of `text` that the query matched."""
    # A phrase's stopwords (`the` of `state-of-the-art`) would light up every
    # `the` of the text: only the phrase's other words count.
    phrase_words = {word for phrase in plan.phrases for _, word in phrase}
    wanted = set(plan.terms) | {word for word in phrase_words if not is_stopword(word)}
    lowered = lower_same_length(text)
    spans: list[MatchSpan] = []
    word_terms: dict[str, str | None] = {}  # a word's term, analysed once per text
    cjk = {term for term in wanted if CJK_RUN.fullmatch(term)}
    for term in cjk:
        spans += _cjk_spans(lowered, term)
    if _folds_otherwise(text):
        # A word written otherwise than its term (`ｃｈｕｎｋＳｉｚｅ`, `ﬁle`, `𝒳`):
        # the prefix search cannot see it, so every word is analysed.
        spans += _every_word_span(analyzer, lowered, wanted - cjk, word_terms)
    else:
        for term in wanted - cjk:
            spans += _word_spans(analyzer, lowered, term, word_terms)
    spans += [
        MatchSpan(found.start, found.end, identifier=True)
        for found in find_identifiers(text, plan.identifiers)
    ]
    return _merge(spans)


def _cjk_spans(lowered: str, term: str) -> list[MatchSpan]:
    return [MatchSpan(start, start + len(term)) for start in _occurrences(lowered, term)]


def _word_spans(
    analyzer: TextAnalyzer,
    lowered: str,
    term: str,
    word_terms: dict[str, str | None] | None = None,
) -> list[MatchSpan]:
    """`word_terms`: the terms of words already analysed (shared by the terms
    of one text, so each distinct word is analysed once)."""
    if word_terms is None:
        word_terms = {}
    prefix = term[:-1] if len(term) > 2 else term
    spans: list[MatchSpan] = []
    find = lowered.find
    start = find(prefix)
    while start != -1:
        # Not inside a word (the letter before it is no word letter).
        if not start or not _is_word_char(lowered[start - 1]):
            word = WORD.match(lowered, start)
            if word:
                text = word.group()
                if text in word_terms:
                    found = word_terms[text]
                else:
                    found = word_terms[text] = analyzer.word_term(text)
                if found == term:
                    spans.append(MatchSpan(start, word.end()))
        start = find(prefix, start + 1)
    return spans


def _folds_otherwise(text: str) -> bool:
    """Whether NFKC changes a word letter of `text`: then a word's term may
    not start with the letters the text shows (the analyzer folds words with
    NFKC). Full-width punctuation (`，`, `：` in Chinese text) does not count."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return False
    return any(_word_letter_folds(char) for char in set(text) if not char.isascii())


_FOLDS: dict[str, bool] = {}


def _word_letter_folds(char: str) -> bool:
    known = _FOLDS.get(char)
    if known is None:
        known = _is_word_char(char) and unicodedata.normalize("NFKC", char) != char
        if len(_FOLDS) < _WORD_CHAR_LIMIT:
            _FOLDS[char] = known
    return known


def _every_word_span(
    analyzer: TextAnalyzer, lowered: str, terms: set[str], word_terms: dict[str, str | None]
) -> list[MatchSpan]:
    spans: list[MatchSpan] = []
    for word in WORD.finditer(lowered):
        text = word.group()
        if text not in word_terms:
            word_terms[text] = analyzer.word_term(text)
        if word_terms[text] in terms:
            spans.append(MatchSpan(word.start(), word.end()))
    return spans


# Whether one character is a word letter (WORD's class), by character: every
# hit's text asks about the same few characters.
_WORD_CHAR: dict[str, bool] = {}
_WORD_CHAR_LIMIT = 65536


def _is_word_char(char: str) -> bool:
    known = _WORD_CHAR.get(char)
    if known is None:
        known = WORD.match(char) is not None
        if len(_WORD_CHAR) < _WORD_CHAR_LIMIT:
            _WORD_CHAR[char] = known
    return known


def _occurrences(text: str, needle: str) -> Iterator[int]:
    start = text.find(needle)
    while start != -1:
        yield start
        start = text.find(needle, start + 1)


def _merge(spans: list[MatchSpan]) -> list[MatchSpan]:
    merged: list[MatchSpan] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        last = merged[-1] if merged else None
        if last is not None and span.start <= last.end:
            merged[-1] = MatchSpan(
                last.start, max(last.end, span.end), last.identifier or span.identifier
            )
        else:
            merged.append(span)
    return merged
