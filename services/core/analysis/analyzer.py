"""The lexical analysis both stores index and search with.

One Python analyzer produces every term, and the stores only split its output
at spaces (tantivy: a `whitespace` tokenizer; OpenSearch: the `rag_terms`
analyzer, a `whitespace` tokenizer with no filters). The token streams of the
two stores are therefore identical by construction, whatever the language:
neither tantivy nor OpenSearch ships the same Chinese segmenter, and a
mirrored pair of analyzers drifts one edge case at a time.

Words (every script without CJK): maximal runs of letters and digits, as
tantivy's `en_stem` did before (runs over 40 bytes dropped, lower-cased,
NFKC-normalised so full-width `ｃｈｕｎｋ` equals `chunk`, English Snowball
stemming). CJK runs (Han, kana, Hangul), which carry no spaces between words:
- Chinese (`CjkMode.WORDS`, default): jieba's search-mode segmentation
  (rjieba, the jieba-rs binding): words plus the shorter words inside long ones
  (`中华人民共和国` → `中华`, `人民`, `共和国`, …), so a question that uses a
  part of a compound still matches;
- Japanese and Korean, and Chinese in `CjkMode.BIGRAMS`: overlapping character
  bigrams (a lone character is a unigram), the classic CJK analysis of Lucene.
The mode was chosen by measurement on the bilingual evaluation set
(docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import regex
import rjieba
import Stemmer

from services.core.analysis.identifiers import document_identifiers, query_identifiers
from services.core.analysis.scripts import CJK, Script, nfkc, run_script
from services.core.analysis.stopwords import is_stopword

# Bump when the terms for the same text change: an index records the version
# it was built with, and a different one needs a re-index (docs/indexing.md).
ANALYSIS_VERSION = 2
MAX_WORD_BYTES = 40
MAX_TERMS = 64
MAX_PHRASES = 16

# Letters, digits and the combining marks that belong to them (Devanagari
# vowel signs, Arabic harakat, a decomposed accent), CJK aside.
_WORD_CHARS = f"[\\p{{L}}\\p{{N}}\\p{{M}}--[{CJK}]]"
_TOKEN = regex.compile(f"([{CJK}]+)|({_WORD_CHARS}+)", regex.V1)
WORD = regex.compile(f"{_WORD_CHARS}+", regex.V1)
MAX_PHRASE_WORDS = 16


class CjkMode(StrEnum):
    WORDS = "words"
    BIGRAMS = "bigrams"
    BOTH = "both"  # jieba words and bigrams of Chinese, in one stream


@dataclass(frozen=True, slots=True)
class Token:
    term: str
    start: int  # code point offsets into the analyzed text
    end: int
    cjk: bool


# A phrase word is (position relative to the first token, term).
PhraseWord = tuple[int, str]


@dataclass(frozen=True)
class QueryPlan:
    """The analyzed query: terms, identifier phrases, exact identifiers."""

    terms: tuple[str, ...]
    phrases: tuple[tuple[PhraseWord, ...], ...] = ()
    identifiers: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not (self.terms or self.phrases or self.identifiers)

    def describe(self) -> str:
        """Lucene-like rendering for debug output (never parsed back)."""
        words = [*self.terms, *('"' + " ".join(w for _, w in p) + '"' for p in self.phrases)]
        exact = [f"={identifier}" for identifier in self.identifiers]
        return " ".join(words + exact) or "<empty>"


@dataclass(frozen=True)
class AnalyzedChunk:
    """What a lexical store indexes for one chunk: space-separated terms per
    text field, and the chunk's exact identifier forms."""

    title: str
    heading_path: str
    text: str
    identifiers: str


class TextAnalyzer:
    """Turns text into index terms and queries into plans (module docstring)."""

    def __init__(self, cjk: CjkMode = CjkMode.WORDS, *, drop_stopwords: bool = True) -> None:
        self.cjk = CjkMode(cjk)
        self.drop_stopwords = drop_stopwords
        self._stemmer = Stemmer.Stemmer("english")
        # The query path plans each query twice in one process (the retriever
        # for identifiers and highlights, the lexical store for its search);
        # plans are immutable, so the second is a lookup.
        self.plan = lru_cache(maxsize=1024)(self._plan)

    @property
    def version(self) -> str:
        """Recorded in every index; a different value means a re-index."""
        return f"{ANALYSIS_VERSION};cjk={self.cjk.value}"

    def tokens(self, text: str) -> list[Token]:
        """Every term of `text`, in order, with its span."""
        found: list[Token] = []
        for match in _TOKEN.finditer(text):
            if match.group(1):
                found.extend(self._cjk_tokens(match.group(1), match.start()))
            elif (word := self.word_term(match.group(2))) is not None:
                found.append(Token(word, match.start(), match.end(), cjk=False))
        return found

    def terms(self, text: str) -> str:
        return " ".join(token.term for token in self.tokens(text))

    def analyze_chunk(self, title: str, heading_path: str, text: str) -> AnalyzedChunk:
        return AnalyzedChunk(
            title=self.terms(title),
            heading_path=self.terms(heading_path),
            text=self.terms(text),
            identifiers=" ".join(document_identifiers((title, heading_path, text))),
        )

    def _plan(self, query: str) -> QueryPlan:
        """Terms (stopwords left out unless nothing else is left), a phrase per
        whitespace piece that splits into several words, exact identifiers."""
        kept: dict[str, None] = {}  # dicts keep first-seen order, sets do not
        stop: dict[str, None] = {}
        phrases: dict[tuple[PhraseWord, ...], None] = {}
        for piece in query.split():
            tokens = self.tokens(piece)
            for token in tokens:
                bucket = stop if self.drop_stopwords and is_stopword(token.term) else kept
                if len(bucket) < MAX_TERMS:
                    bucket.setdefault(token.term)
            for run in _word_runs(tokens):
                run = run[:MAX_PHRASE_WORDS]
                if len(run) > 1 and len(phrases) < MAX_PHRASES:
                    phrases.setdefault(tuple((i, token.term) for i, token in enumerate(run)))
        identifiers = query_identifiers(query)
        chosen = kept if kept or phrases or identifiers else stop
        return QueryPlan(tuple(chosen), tuple(phrases), identifiers)

    def word_term(self, word: str) -> str | None:
        """The term of one word (no CJK inside), or None when it is dropped."""
        if len(word.encode()) > MAX_WORD_BYTES:
            return None
        return _stem(self._stemmer, _fold(word))

    def _cjk_tokens(self, run: str, offset: int) -> Iterator[Token]:
        han = run_script(run) is Script.HAN
        folded = nfkc(run)
        if len(folded) != len(run):
            # Half-width kana with voicing marks fold two characters into one:
            # analyse the folded run, and give every token the whole run's span.
            for token in self._cjk_tokens(folded, 0):
                yield Token(token.term, offset, offset + len(run), cjk=True)
            return
        if han and self.cjk in (CjkMode.WORDS, CjkMode.BOTH):
            for word, start, end in _segment(folded):
                yield Token(word, offset + start, offset + end, cjk=True)
        if not han or self.cjk in (CjkMode.BIGRAMS, CjkMode.BOTH):
            yield from _bigrams(folded, offset)


def _bigrams(run: str, offset: int) -> Iterator[Token]:
    """Overlapping character pairs; a lone character is a unigram."""
    if len(run) == 1:
        yield Token(_fold(run), offset, offset + 1, cjk=True)
        return
    for i in range(len(run) - 1):
        yield Token(_fold(run[i : i + 2]), offset + i, offset + i + 2, cjk=True)


def _word_runs(tokens: list[Token]) -> Iterator[list[Token]]:
    """Consecutive non-CJK tokens of one piece (`text-embedding-v4`)."""
    run: list[Token] = []
    for token in tokens:
        if token.cjk:
            if run:
                yield run
            run = []
        else:
            run.append(token)
    if run:
        yield run


def _fold(text: str) -> str:
    if not text.isascii():
        # NFKC can expand a character into several, never into a term break.
        text = "".join(nfkc(text).split())
    return text.lower()


@lru_cache(maxsize=262144)
def _stem(stemmer: Stemmer.Stemmer, word: str) -> str:
    stemmed: str = stemmer.stemWord(word)
    return stemmed


# Runs up to this length are cached: a question's phrases recur, a page's
# sentences rarely do. Caching every run let distinct long questions fill
# the cache at ~180 KB each (65,536 entries: ~12 GB; probe 3); short runs
# cost at most a few KB each.
CACHED_RUN_CHARS = 32


def _segment(run: str) -> tuple[tuple[str, int, int], ...]:
    if len(run) <= CACHED_RUN_CHARS:
        return _segment_cached(run)
    return _segment_run(run)


@lru_cache(maxsize=65536)
def _segment_cached(run: str) -> tuple[tuple[str, int, int], ...]:
    return _segment_run(run)


def _segment_run(run: str) -> tuple[tuple[str, int, int], ...]:
    # hmm=False: the HMM guesses unknown words from context, so the same
    # characters could split differently in a query than in a page.
    return tuple(rjieba.tokenize(run, mode="search", hmm=False))
