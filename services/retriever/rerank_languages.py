"""Which (question, passage) pairs the Reranker's model can read.

An English cross-encoder scores a Chinese question or a Chinese passage
anyway, and its scores are noise there: reordering by them lost rank 1 on 9 of
34 Chinese questions of a bilingual site (issue 34). So pairs it cannot read
are not sent: they keep their fused places, and the answer says how many.

Only the scripts that matter here are told apart: text written mostly in
Chinese, Japanese or Korean characters is in that language; anything else is
taken as readable by an English model (Latin-script languages, code). "Mostly"
weighs one CJK character against one Latin *word*, since a CJK character
carries about a word: "使用 git commit 提交更改" is Chinese.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

EVERY_LANGUAGE = "*"
_LATIN_WORD = re.compile(r"[A-Za-z]+")
MOSTLY = 0.5  # CJK share above which a text is in that language


def parse_languages(spec: str) -> frozenset[str]:
    """ "en", "en,fr" or "*" (a multilingual model reads every pair)."""
    return frozenset(part.strip().lower() for part in spec.split(",") if part.strip())


def script_language(text: str) -> str:
    """ "zh", "ja" or "ko" for text mostly in those scripts, "" otherwise."""
    han = kana = hangul = 0
    for char in text:
        code = ord(char)
        if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF:
            han += 1
        elif 0x3040 <= code <= 0x30FF:
            kana += 1
        elif 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF:
            hangul += 1
    cjk = han + kana + hangul
    if not cjk:
        return ""
    words = len(_LATIN_WORD.findall(text))
    if cjk / (cjk + words) <= MOSTLY:
        return ""
    if hangul > han + kana:
        return "ko"
    return "ja" if kana else "zh"


class ReadableFilter:
    """Decides per text whether the model reads it (`languages` as parsed)."""

    def __init__(self, languages: Iterable[str]) -> None:
        self.languages = frozenset(languages)

    @property
    def reads_everything(self) -> bool:
        return EVERY_LANGUAGE in self.languages

    def unread(self, text: str) -> str:
        """The language of `text` when the model does not read it, else ""."""
        if self.reads_everything:
            return ""
        language = script_language(text)
        return language if language and language not in self.languages else ""

    def describe(self) -> str:
        return ", ".join(sorted(self.languages))
