"""Ranking across languages: each locale's pages are ranked apart, then the
locales take turns.

Two pulls keep a question on pages of its own language. A multilingual model
ranks same-language pages above other-language answers (measured with
multilingual-e5-small over a mixed index), and BM25 can only match words of
the question's own language, so under plain RRF an unrelated page of the
question's language collects two votes while the other-language answer can
collect one. The rule, where it can matter (a model that reads every
language, an index of several locales, a request that fixes none):

1. the vector channel searches each locale of the index on its own;
2. each locale's list is fused with the lexical hits of that locale, but in
   a locale of another language than the question's only the lexical hits
   that hold one of the question's exact identifiers count (an identifier
   reads the same in every language; an ordinary word does not, so a lexical
   miss there is expected, not evidence);
3. the fused locale lists take turns (1st of each, then 2nd of each, …), the
   question's language first (by the best fused score when the question has
   no language, e.g. an identifier alone).

Measured on the bilingual set with multilingual-e5-small (docs/benchmarks.md)
against plain RRF and against interleaving the vector channel alone; the
answer names the rule in its notes.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TypeVar

from services.common.analysis import UNDETERMINED, primary_language
from services.common.models import ScoredChunk
from services.common.stores.manifest import Manifest
from services.retriever.fusion import RrfFuser
from services.retriever.types import Channel, FusedHit

T = TypeVar("T")


class LocaleBalance(StrEnum):
    INTERLEAVE = "interleave"  # locales ranked apart, taken in turns
    OFF = "off"  # one vector list and one fusion over every locale


class IndexLocales:
    """A cached reading of the locales the index holds (from the manifest)."""

    def __init__(
        self,
        read: Callable[[], Iterable[str]],
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._refresh_s, self._clock = read, refresh_s, clock
        self._lock = threading.Lock()
        self._value: tuple[str, ...] | None = None
        self._read_at = 0.0

    @classmethod
    def of(cls, manifest: Manifest, refresh_s: float = 5.0) -> IndexLocales:
        return cls(lambda: manifest.chunk_counts_by_locale().keys(), refresh_s)

    def current(self) -> tuple[str, ...]:
        """The locales, read again when the last reading is older than
        `refresh_s`; a failed re-read keeps the last value (or none)."""
        with self._lock:
            if self._value is None or self._clock() - self._read_at >= self._refresh_s:
                try:
                    self._value = tuple(sorted(set(self._read()) - {""}))
                except Exception:
                    self._value = self._value or ()
                self._read_at = self._clock()
            return self._value


def interleaved(lists: Sequence[list[T]]) -> list[T]:
    """Each list's 1st, then each list's 2nd, …; a list that runs out is skipped."""
    turns = itertools.zip_longest(*lists)
    return [hit for turn in turns for hit in turn if hit is not None]


def fuse_per_locale(
    fuser: RrfFuser,
    vector_by_locale: Mapping[str, list[ScoredChunk]],
    lexical: Sequence[ScoredChunk],
    query_language: str,
    weights: Mapping[Channel, float] | None,
) -> list[FusedHit]:
    """Steps 2 and 3 of the module docstring."""
    fused_lists: list[tuple[bool, list[FusedHit]]] = []
    for locale, vector_hits in vector_by_locale.items():
        own = query_language in ("", UNDETERMINED) or primary_language(locale) == query_language
        lexical_hits = [h for h in lexical if h.chunk.locale == locale and (own or h.exact)]
        ranked = {Channel.VECTOR: vector_hits, Channel.LEXICAL: lexical_hits}
        fused_lists.append((own, fuser.fuse(ranked, weights)))
    fused_lists.sort(key=lambda item: (not item[0], -_best_score(item[1])))
    return interleaved([hits for _, hits in fused_lists])


def _best_score(hits: list[FusedHit]) -> float:
    return hits[0].fused_score if hits else 0.0


def balance_note(locales: Sequence[str]) -> str:
    return (
        f"ranked each locale apart ({', '.join(locales)}): vector per locale, lexical words "
        "only in the question's language (identifiers in every locale), locales in turns"
    )
