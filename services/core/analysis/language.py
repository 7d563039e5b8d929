"""The query-language rule: which language a query is in, by script.

A statistical detector is unreliable on a five-word query and cannot explain
itself; scripts are exact. Every CJK character counts as one unit of its
language (a Chinese word is one to three characters; kana anywhere make the
query Japanese, kanji included; Hangul Korean), every word of another script
as one unit of the language its script names (Latin script counts as English:
a script cannot tell English from French, the request's `query_language`
can). Identifiers (`chunkSize`, `text-embedding-v4`, `429`) belong to no
language, so neither they nor their parts count. The language with the most
units wins; a tie goes to the CJK language, because a CJK question that
quotes English terms is still a CJK question. A query with no units at all
(`429`, `chunkSize=800`) is `und`: nothing says a model could not read it.
"""

from __future__ import annotations

from collections import Counter

from services.core.analysis.identifiers import PIECE, is_identifier, strip_edges
from services.core.analysis.scripts import (
    HAN_CHAR,
    HANGUL_CHAR,
    KANA_CHAR,
    OTHER_WORD,
    word_language,
)

UNDETERMINED = "und"
CJK_LANGUAGES = ("zh", "ja", "ko")


def detect_language(text: str) -> str:
    """`zh`, `ja`, `ko`, `en`, another script's language, or `und`."""
    units = _cjk_units(text)
    for piece in PIECE.finditer(text):
        if not is_identifier(strip_edges(piece.group())):
            for word in OTHER_WORD.findall(piece.group()):
                units[word_language(word)] += 1
    best_cjk = max(CJK_LANGUAGES, key=lambda lang: units[lang])
    others = [lang for lang in units if lang not in CJK_LANGUAGES]
    best_other = max(others, key=lambda lang: units[lang], default="")
    if units[best_cjk] and units[best_cjk] >= units[best_other]:
        return best_cjk
    return best_other if best_other and units[best_other] else UNDETERMINED


def _cjk_units(text: str) -> Counter[str]:
    units: Counter[str] = Counter()
    units["zh"] = len(HAN_CHAR.findall(text))
    kana = len(KANA_CHAR.findall(text))
    if kana:  # Japanese mixes kanji with kana: all of it is Japanese
        units["ja"], units["zh"] = kana + units["zh"], 0
    units["ko"] = len(HANGUL_CHAR.findall(text))
    return units
