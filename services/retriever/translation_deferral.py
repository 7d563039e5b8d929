"""Whether a scope's translated question waits for the cross-lingual
channel's verdict before it is embedded (services.retriever.fan_out).

Deferring pays where most questions' other-language locales are sure to wait
(a documentation site with a minority of unrelated pages in another
language): their translation is then never embedded. It costs where they
take turns (a translated site): the translation is embedded after the
question instead of in the same pass, a serial step. Measured on this
machine (2 cores, bench/results/notes/deferred_translation.md): a question
whose translation was skipped answered 27-43 ms sooner, one whose
translation was still needed 4-32 ms later, so deferring pays when more than
about a third of the questions skip it. The share is learnt per scope from
the verdicts themselves, which the fan-out reads on every bilingual request,
deferred or not; a scope starts undeferred (the former behaviour) and
defers once its recent share passes `THRESHOLD`. Either way the answer is
the same: a waiting locale is ranked by the question's vector alone, whether
its translation was embedded or not (services.retriever.locale_balance,
`fuse_locales`), so a page token never sees the ranking change when a
scope's share crosses the threshold between two pages.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from services.core.analysis import primary_language
from services.core.models import ScoredChunk
from services.retriever.locale_groups import list_of
from services.retriever.locale_order import LocaleOrderRule

T = TypeVar("T")

THRESHOLD = 0.4  # above the measured break-even share (~0.35), below the mixed site's (0.5-0.6)
WEIGHT = 0.1  # of the newest verdict in the running share (about the last 10 questions)


class TranslationDeferral:
    """The running share, per scope, of bilingual questions whose every
    translation was sure to wait; a bounded number of scopes is kept."""

    def __init__(
        self, threshold: float = THRESHOLD, weight: float = WEIGHT, max_scopes: int = 1024
    ) -> None:
        self.threshold, self.weight, self.max_scopes = threshold, weight, max_scopes
        self._lock = threading.Lock()
        self._shares: OrderedDict[Hashable, float] = OrderedDict()

    def defers(self, scope: Hashable) -> bool:
        with self._lock:
            return self._shares.get(scope, 0.0) >= self.threshold

    def observe(self, scope: Hashable, every_translation_waited: bool) -> None:
        with self._lock:
            share = self._shares.pop(scope, 0.0)
            share += self.weight * (float(every_translation_waited) - share)
            self._shares[scope] = share
            while len(self._shares) > self.max_scopes:
                self._shares.popitem(last=False)


def needed_translations(
    rule: LocaleOrderRule,
    language: str,
    locales: Sequence[str],
    translations: Mapping[str, T],
    cross_lingual: Sequence[ScoredChunk] | None,
) -> dict[str, T]:
    """The `translations` (by language) of a language with a locale that
    takes turns: the other languages' locales are sure to wait (`rule`,
    from each locale's best cosine in the cross-lingual channel's hits, best
    first; None: that channel did not answer, and every translation is
    needed), so the question's vector alone ranks their lists, which follow
    every other."""
    best: dict[str, float | None] = dict.fromkeys(locales)
    for hit in cross_lingual or ():
        locale = list_of(hit.chunk.locale, best)
        if locale is not None and best[locale] is None:
            best[locale] = hit.score
    waiting = rule.sure_to_wait(best, language) if cross_lingual is not None else frozenset()
    taking_turns = {primary_language(locale) for locale in locales if locale not in waiting}
    return {lang: text for lang, text in translations.items() if lang in taking_turns}
