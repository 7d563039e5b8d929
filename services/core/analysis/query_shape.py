"""Whether a query reads as a question or as a few remembered words.

The two channels are strong on different queries: a question or a claim
("how do I keep the two stores in step") is a meaning the embedding model
places well, while a few words typed from memory ("promisify penalty"), one
of them rare, are a lexical match the model cannot place. A channel weight
fitted on questions therefore applies only to a query that reads as one
(services.retriever.candidates): enough words, and at least one function word
(`how`, `the`, `to`, `的`, `吗`), which a bag of remembered words lacks.

Words: letters of a non-CJK script count one per word (digits and exact
identifiers such as `text-embedding-v4` do not); a run of Han characters
counts one word per two characters (the mean length of a Chinese word), kana
and Hangul likewise.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.analysis.identifiers import PIECE, is_identifier, strip_edges
from services.core.analysis.scripts import CJK_RUN, OTHER_WORD
from services.core.analysis.stopwords import CHINESE_STOPWORDS, is_stopword

# The query stopword list (Lucene's 33 English words) has no interrogatives
# or auxiliaries, so "how much does a rerank cost" counted no function word
# and read as remembered words. These count as function words here only:
# the lexical channel still searches them (`how` in `how-to` is content).
_ENGLISH_QUESTION_WORDS = frozenset(
    (
        *("what", "how", "why", "when", "where", "which", "who", "whom", "whose"),
        *("do", "does", "did", "can", "could", "should", "would", "may", "might", "must"),
        *("shall", "am", "were", "has", "have", "had", "been"),
        *("i", "me", "my", "we", "our", "you", "your"),
    )
)
# Single-character Chinese function words are counted by character; longer
# ones (`怎么`, `如何`) by substring.
_CHINESE_LONG = tuple(word for word in CHINESE_STOPWORDS if len(word) > 1)
_CHINESE_SHORT = frozenset(word for word in CHINESE_STOPWORDS if len(word) == 1)


@dataclass(frozen=True)
class QueryShape:
    words: int
    function_words: int

    def reads_as_question(self, min_words: int) -> bool:
        """At least `min_words` words, one of them a function word."""
        return self.words >= min_words and self.function_words > 0


def query_shape(text: str) -> QueryShape:
    """The query's word and function-word counts (module docstring)."""
    plain = CJK_RUN.sub(" ", text)
    pieces = (p.group() for p in PIECE.finditer(plain) if not is_identifier(strip_edges(p.group())))
    latin = [word for piece in pieces for word in OTHER_WORD.findall(piece)]
    function = sum(1 for word in latin if _is_function_word(word.lower()))
    runs = CJK_RUN.findall(text)
    cjk_words = sum((len(run) + 1) // 2 for run in runs)
    for run in runs:
        function += sum(run.count(word) for word in _CHINESE_LONG)
        function += sum(1 for char in run if char in _CHINESE_SHORT)
    return QueryShape(len(latin) + cjk_words, function)


def _is_function_word(word: str) -> bool:
    return word in _ENGLISH_QUESTION_WORDS or is_stopword(word)
