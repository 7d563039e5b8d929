"""Query stopwords: terms too common to help a ranking, left out of queries.

Only queries drop them (an index keeps every term, so a phrase or a query made
of nothing but stopwords still matches). English: tantivy's built-in English
list, which the lexical channel used before this analyzer existed (asked of
tantivy itself, so the two never drift). Chinese: function words and question
words that every page or question contains; they carry no topic, yet in a
question without spaces they are half of the terms.
"""

from __future__ import annotations

from functools import lru_cache

import tantivy as tv

_ENGLISH = tv.TextAnalyzerBuilder(tv.Tokenizer.raw()).filter(tv.Filter.stopword("english")).build()

_CHINESE = (
    "的 了 是 在 吗 呢 吧 啊 呀 么 和 与 及 或 而 也 都 就 还 又 "
    "把 被 让 给 对 从 向 我 你 您 他 她 它 我们 你们 他们 这 那 "
    "这个 那个 这些 那些 这里 那里 什么 怎么 怎样 怎么样 如何 为什么 "
    "为何 哪 哪个 哪些 哪里 多少 几 是否 是不是 请问 一下 可以 能 能否 "
    "能不能 会 要 需要 应该 有 没有 "
)
CHINESE_STOPWORDS = frozenset(_CHINESE.split())


@lru_cache(maxsize=65536)
def is_stopword(term: str) -> bool:
    """Whether a query term is a stopword (terms are lower-cased already)."""
    if term in CHINESE_STOPWORDS:
        return True
    return term.isascii() and not _ENGLISH.analyze(term)
