"""The locales a request's scope holds, read from the manifest and cached per
scope (services.retriever.locale_balance ranks each of them apart)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from services.core.deadline import Deadline
from services.core.models import ScopeFilter
from services.storage.manifest import Manifest

LocaleRead = Callable[[Sequence[str], Sequence[str], Deadline], Iterable[str]]


@dataclass(frozen=True)
class _Reading:
    locales: tuple[str, ...]
    read_at: float
    generation: int | None  # the committed generation the scope was read at


class IndexLocales:
    """Cached readings of the locales a request's scope holds (from the
    manifest's `locales_in`): the scopes it searches and the documents it
    names, not the whole index, so one bilingual tenant does not make every
    tenant's questions rank several locales apart. A reading serves one
    scope until `refresh_s` passes or the committed generation the request
    sees moves (a commit is the only thing that changes which locales hold
    committed rows)."""

    def __init__(
        self,
        read: LocaleRead,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        max_scopes: int = 1024,
    ) -> None:
        self._read, self._refresh_s, self._clock = read, refresh_s, clock
        self._max_scopes = max_scopes
        self._lock = threading.Lock()  # guards the cache only, never held over a read
        self._readings: OrderedDict[tuple[tuple[str, ...], tuple[str, ...]], _Reading] = (
            OrderedDict()
        )

    @classmethod
    def of(cls, manifest: Manifest, refresh_s: float = 5.0) -> IndexLocales:
        return cls(manifest.locales_in, refresh_s)

    def cached(self, scope: ScopeFilter) -> tuple[str, ...] | None:
        """The scope's locales without reading: None when a read is due."""
        key = scope_key(scope)
        if key is None:
            return ()  # a scope no row can match holds no locale
        with self._lock:
            reading = self._readings.get(key)
            if reading is None or not self._fresh(reading, scope.visible_generation):
                return None
            self._readings.move_to_end(key)
            return reading.locales

    def current(self, scope: ScopeFilter, deadline: Deadline) -> tuple[str, ...]:
        """The scope's locales, read within `deadline` when due. A read that
        fails, or a deadline already passed (no read then), keeps the last
        reading of the scope, or none: the request is ranked as one list."""
        if (locales := self.cached(scope)) is not None:
            return locales
        key = scope_key(scope)
        assert key is not None  # cached() answers for scopes that match nothing
        if deadline.expired():
            return self.last(scope)
        try:
            found = tuple(sorted(set(self._read(key[0], key[1], deadline)) - {""}))
        except Exception:
            return self.last(scope)
        with self._lock:
            self._readings[key] = _Reading(found, self._clock(), scope.visible_generation)
            self._readings.move_to_end(key)
            while len(self._readings) > self._max_scopes:
                self._readings.popitem(last=False)
        return found

    def last(self, scope: ScopeFilter) -> tuple[str, ...]:
        """The last reading of the scope, however old (none before the first)."""
        key = scope_key(scope)
        with self._lock:
            reading = self._readings.get(key) if key is not None else None
        return reading.locales if reading is not None else ()

    def _fresh(self, reading: _Reading, generation: int | None) -> bool:
        return (
            reading.generation == generation and self._clock() - reading.read_at < self._refresh_s
        )


def scope_key(scope: ScopeFilter) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The filters that narrow which locales a scope holds: its scopes (both
    `scope_id` and `scope_ids` hold when both are set; None: no scope does)
    and its documents; () is every one."""
    scopes = tuple(sorted(set(scope.scope_ids)))
    if scope.scope_id:
        if scopes and scope.scope_id not in scopes:
            return None
        scopes = (scope.scope_id,)
    return scopes, tuple(sorted(set(scope.doc_ids)))
