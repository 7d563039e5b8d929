"""Which language a query is in, and whether the vector channel can read it.

An embedding model reads the languages it was trained on; for any other
language its vectors are close to noise (the packaged all-MiniLM-L6-v2 put the
wrong page first for Chinese questions). RRF gives every list a vote by rank
alone, so a channel ranking by noise outvotes a lexical channel that found the
right page. The rule:

- the query's language is the request's `query_language` when given, else the
  script rule of `services.core.analysis.language` (CJK characters against
  words of other scripts; identifiers do not count; a query of identifiers
  alone is `und`, which any model is taken to read);
- when the query's language or the scope's locale is not one the model reads,
  the vector channel's RRF weight becomes `unread_weight` (default 0: the
  channel is left out, and the query is not even embedded);
- only when both channels were asked for: a caller who asks for the vector
  channel alone gets it, with a note; a scope locale counts only when it names
  a language (`zh-CN`, not `x-default`).

Leaving the channel out is a decision, not a failure: it is reported as a
debug note and a skipped channel, never as `degraded`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.core.analysis import UNDETERMINED, detect_language, primary_language
from services.core.errors import InvalidArgument
from services.retriever.types import Channel

EVERY_LANGUAGE = "*"
# Primary subtags that name no language (BCP 47: private use, special codes).
NOT_A_LANGUAGE = frozenset({UNDETERMINED, "mul", "zxx", "mis", "x", "i"})
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}$")


@dataclass(frozen=True)
class LanguageDecision:
    language: str
    detected: bool  # False: the caller said which language
    vector_weight: float  # multiplies the vector channel's RRF weight
    note: str = ""  # why the vector channel was changed ("" when it was not)

    @property
    def skip_vector(self) -> bool:
        return self.vector_weight == 0.0


class LanguageRule:
    def __init__(self, model_languages: frozenset[str], unread_weight: float = 0.0) -> None:
        self.model_languages = frozenset(primary_language(x) for x in model_languages) or {
            EVERY_LANGUAGE
        }
        self.unread_weight = unread_weight

    def reads(self, language: str) -> bool:
        if language in NOT_A_LANGUAGE or not _LANGUAGE_CODE.match(language):
            return True  # nothing says the model cannot read it
        return EVERY_LANGUAGE in self.model_languages or language in self.model_languages

    def decide(
        self,
        query: str,
        requested: str = "",
        scope_locale: str = "",
        *,
        vector_requested: bool = True,
        hybrid: bool = True,
    ) -> LanguageDecision:
        language = primary_language(requested) or detect_language(query)
        detected = not requested.strip()
        unread = self._unread(language, primary_language(scope_locale))
        if not unread or not vector_requested:
            return LanguageDecision(language, detected, 1.0)
        reads = ", ".join(sorted(self.model_languages))
        if not hybrid:
            note = f"vector channel kept as requested, though the model does not read {unread}"
            return LanguageDecision(language, detected, 1.0, note)
        weighted = f"weighted ×{self.unread_weight:g}"
        change = "left out" if self.unread_weight == 0.0 else weighted
        note = (
            f"vector channel {change}: the embedding model reads {reads}, not {unread} "
            f"(query language {language}, {'detected' if detected else 'given'})"
        )
        return LanguageDecision(language, detected, self.unread_weight, note)

    def _unread(self, language: str, scope_language: str) -> str:
        if language and not self.reads(language):
            return language
        if scope_language and not self.reads(scope_language):
            return f"{scope_language} (the scope's locale)"
        return ""


def language_weights(
    requested: dict[Channel, float] | None, language: LanguageDecision
) -> dict[Channel, float] | None:
    """The caller's weights with the language rule's factor on the vector channel."""
    if language.vector_weight in (0.0, 1.0):  # 0: the channel did not run at all
        return requested
    weights = dict(requested or {})
    weights[Channel.VECTOR] = weights.get(Channel.VECTOR, 1.0) * language.vector_weight
    return weights


_LANGUAGE_TAG = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8}){0,3}$")


def check_language(tag: str) -> str:
    """A request's `query_language`: empty (detect) or a language tag."""
    tag = tag.strip()
    if tag and not _LANGUAGE_TAG.match(tag):
        raise InvalidArgument(
            f"query_language: {tag[:40]!r} is not a language tag such as en, zh or zh-CN"
        )
    return tag
