"""A question's words in the other language, for the lexical channel over the
other language's pages (services.retriever.locale_balance).

Chinese → English: the question's Chinese runs are cut into words with jieba
(the longest words the dictionary knows; a word it does not know is looked up
by the shorter words inside it), function words are dropped, and each word
gives the words of its first glosses, at most `per_word` of them, so that a
word with many senses does not outvote a word with one.

English → Chinese: phrases of up to three words are looked up before single
words ("rate limiting" before "rate"), a plural or -ed/-ing form by its stem
first, then as it is; each gives the Chinese words whose entry glosses it
exactly (the entries where it is one of the first two senses first, each
group by how common the word is), at most `per_word`.

Words already in the target language (English words inside a Chinese question,
which are usually names) are kept as they are. The result is plain text for
the lexical analyzer, so every lexical store searches it the way it searches
any question.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

import rjieba

from services.core.analysis.bilingual_dictionary import BilingualDictionary
from services.core.analysis.stopwords import CHINESE_STOPWORDS, is_stopword

_CHINESE_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_ASCII_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_ENGLISH_WORD = re.compile(r"[a-z]+")
_SUFFIXES = (
    ("ies", "y"),
    ("es", ""),
    ("s", ""),
    ("ing", ""),
    ("ing", "e"),
    ("ed", ""),
    ("ed", "e"),
)
MAX_PHRASE = 3
# Source words translated per question: the lexical plan keeps 64 terms anyway
# (analysis.analyzer.MAX_TERMS), and a long question's debug note stays short.
MAX_SOURCE_WORDS = 32
# Words a question is made of but a page's topic is not (pronouns, auxiliaries,
# modals, question words, prepositions): the index keeps them, so they are
# queried in English, but their dictionary translations are mostly noise.
_FUNCTION_WORDS = frozenset(
    """
    a about above across after again against all also am an and any are as at be because
    been before being below between both but by can could did do does doing done down
    during each either else ever every few for from get gets got had has have having he
    her here hers him his how i if in into is it its itself just let like made make
    makes many may me might mine more most much must my near need needs neither no nor
    not now of off often on once one ones only or other our ours out over own per please
    same shall she should since so some still such than that the their theirs them then
    there these they this those through to too under until up upon us use used using
    very via was we were what when where whether which while who whom whose why will
    with within without would yes yet you your yours
    """.split()  # noqa: SIM905 (a word list reads better as text)
)


@dataclass(frozen=True)
class Translation:
    """The translated question and, for the debug report, each source word's
    translations."""

    text: str
    words: tuple[tuple[str, tuple[str, ...]], ...]

    def describe(self) -> str:
        return "; ".join(f"{source} → {', '.join(targets)}" for source, targets in self.words)


class QueryTranslator:
    """Translates a question's words between Chinese and English (module docstring)."""

    def __init__(self, dictionary: BilingualDictionary, per_word: int = 3) -> None:
        if per_word < 1:
            raise ValueError(f"per_word: {per_word} must be at least 1")
        self.dictionary, self.per_word = dictionary, per_word

    def translate(self, text: str, source: str, target: str) -> Translation | None:
        """`text` from language `source` into `target` ("zh" or "en"); None
        when the pair is not Chinese–English or no word could be translated."""
        if (source, target) == ("zh", "en"):
            words = list(islice(self._chinese_to_english(text), MAX_SOURCE_WORDS))
            kept = _ASCII_WORD.findall(text)
        elif (source, target) == ("en", "zh"):
            words = list(islice(self._english_to_chinese(text), MAX_SOURCE_WORDS))
            kept = [w for w in _ASCII_WORD.findall(text) if w.lower() not in _FUNCTION_WORDS]
        else:
            return None
        if not words:
            return None
        translated = [t for _, targets in words for t in targets]
        return Translation(" ".join([*kept, *translated]), tuple(words))

    def _chinese_to_english(self, text: str) -> Iterator[tuple[str, tuple[str, ...]]]:
        for run in _CHINESE_RUN.findall(text):
            for word in self._known_words(run):
                if word in CHINESE_STOPWORDS:
                    continue
                english = self._english_words(self.dictionary.glosses(word))
                if english:
                    yield word, english

    def _known_words(self, run: str) -> Iterator[str]:
        """jieba's words of `run`; one the dictionary lacks, by the known words inside it."""
        for word in rjieba.cut(run, hmm=False):
            if self.dictionary.has_chinese(word) or len(word) == 1:
                yield word
                continue
            inner = [w for w, _, _ in rjieba.tokenize(word, mode="search", hmm=False)]
            yield from (w for w in inner if w != word and self.dictionary.has_chinese(w))

    def _english_words(self, glosses: list[str]) -> tuple[str, ...]:
        words: list[str] = []
        for gloss in glosses:
            for word in gloss.split():
                if word not in words and not is_stopword(word):
                    words.append(word)
            if len(words) >= self.per_word:
                break
        return tuple(words[: self.per_word])

    def _english_to_chinese(self, text: str) -> Iterator[tuple[str, tuple[str, ...]]]:
        words = _ENGLISH_WORD.findall(text.lower())
        i = 0
        while i < len(words):
            for size in range(min(MAX_PHRASE, len(words) - i), 0, -1):
                phrase = " ".join(words[i : i + size])
                if all(w in _FUNCTION_WORDS or is_stopword(w) for w in phrase.split()):
                    chinese: list[str] = []
                else:
                    chinese = self._chinese_for(phrase)
                if chinese or size == 1:
                    if chinese:
                        yield phrase, tuple(chinese[: self.per_word])
                    i += size
                    break

    def _chinese_for(self, phrase: str) -> list[str]:
        """The phrase's Chinese words, then its stem's (a plural is glossed
        under the singular far more often than under itself)."""
        found = self.dictionary.chinese_for(phrase)
        if " " in phrase:
            return found
        for suffix, replacement in _SUFFIXES:
            if phrase.endswith(suffix) and len(phrase) > len(suffix) + 2:
                stem = self.dictionary.chinese_for(phrase[: -len(suffix)] + replacement)
                if stem:
                    return list(dict.fromkeys([*stem, *found]))
        return found
