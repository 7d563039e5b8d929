"""Ranking across languages: the vector channel ranks each locale's pages
apart, then takes them in turns.

A multilingual model still pulls a question towards pages of its own
language: measured with multilingual-e5-small over a mixed index, Chinese
questions ranked Chinese pages first even when only an English page
answered. Searching each locale of the index separately and interleaving the
lists by rank (1st of each locale, then 2nd of each, …) gives the best page of
every language a place at the top of the vector list, and RRF then weighs
that list against the lexical one as usual. It applies only where it can
matter: a model that reads every language, an index that holds more than one
locale, and a request that does not fix its locale; the answer says so in its
notes.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum

from services.common.models import ScoredChunk
from services.common.stores.manifest import Manifest


class LocaleBalance(StrEnum):
    INTERLEAVE = "interleave"  # per-locale vector lists taken in turns
    OFF = "off"  # one vector list over every locale


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


def interleaved(lists: Sequence[list[ScoredChunk]]) -> list[ScoredChunk]:
    """Each list's 1st, then each list's 2nd, …; a list that runs out is skipped."""
    turns = itertools.zip_longest(*lists)
    return [hit for turn in turns for hit in turn if hit is not None]


def balance_note(locales: Sequence[str]) -> str:
    return (
        f"vector channel ranked each locale apart ({', '.join(locales)}) and took them in "
        "turns, so a question is not pulled to pages of its own language"
    )
