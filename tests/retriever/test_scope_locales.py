"""The locales a request's scope holds, read and cached per scope
(services.retriever.scope_locales) (unit)."""

from __future__ import annotations

import pytest

from services.core.deadline import Deadline
from services.core.models import ScopeFilter
from services.retriever.scope_locales import IndexLocales

pytestmark = pytest.mark.unit

AMPLE = Deadline.never()


def test_index_locales_are_read_again_only_after_the_refresh_interval() -> None:
    now, reads = [0.0], [["en", "zh-CN"]]
    locales = IndexLocales(lambda *_: reads[-1], refresh_s=5.0, clock=lambda: now[0])
    assert locales.current(ScopeFilter(), AMPLE) == ("en", "zh-CN")
    reads.append(["en", "ja", "zh-CN", ""])
    now[0] = 4.0
    assert locales.cached(ScopeFilter()) == ("en", "zh-CN")
    assert locales.current(ScopeFilter(), AMPLE) == ("en", "zh-CN")
    now[0] = 5.0
    assert locales.cached(ScopeFilter()) is None
    assert locales.current(ScopeFilter(), AMPLE) == ("en", "ja", "zh-CN")


def test_a_new_committed_generation_is_read_again_at_once() -> None:
    reads = [["en"]]
    locales = IndexLocales(lambda *_: reads[-1], refresh_s=60.0, clock=lambda: 0.0)
    assert locales.current(ScopeFilter(visible_generation=3), AMPLE) == ("en",)
    reads.append(["en", "zh-CN"])  # a run committed Chinese pages as generation 4
    assert locales.cached(ScopeFilter(visible_generation=4)) is None
    assert locales.current(ScopeFilter(visible_generation=4), AMPLE) == ("en", "zh-CN")


def test_locales_are_read_per_scope_of_the_request() -> None:
    held = {"api": ["en"], "site": ["en", "zh-CN"]}
    asked: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def read(scope_ids, doc_ids, deadline):  # type: ignore[no-untyped-def]
        asked.append((tuple(scope_ids), tuple(doc_ids)))
        return sorted({loc for s in scope_ids or held for loc in held[s]})

    locales = IndexLocales(read)
    assert locales.current(ScopeFilter(scope_id="api"), AMPLE) == ("en",)
    assert locales.current(ScopeFilter(scope_ids=("site",)), AMPLE) == ("en", "zh-CN")
    assert locales.current(ScopeFilter(), AMPLE) == ("en", "zh-CN")
    both = ScopeFilter(scope_id="api", scope_ids=("site", "api"), doc_ids=("b", "a"))
    assert locales.current(both, AMPLE) == ("en",)
    assert locales.current(ScopeFilter(scope_id="api"), AMPLE) == ("en",)  # cached
    # Scopes that exclude each other hold nothing, without a read.
    assert locales.current(ScopeFilter(scope_id="api", scope_ids=("site",)), AMPLE) == ()
    assert asked == [(("api",), ()), (("site",), ()), ((), ()), (("api",), ("a", "b"))]


def test_a_failed_reading_keeps_the_last_one() -> None:
    now, fail = [0.0], [False]

    def read(*_: object) -> list[str]:
        if fail[0]:
            raise OSError("manifest unavailable")
        return ["en", "zh-CN"]

    locales = IndexLocales(read, refresh_s=1.0, clock=lambda: now[0])
    assert locales.current(ScopeFilter(), AMPLE) == ("en", "zh-CN")
    fail[0], now[0] = True, 2.0
    assert locales.current(ScopeFilter(), AMPLE) == ("en", "zh-CN")
    assert locales.current(ScopeFilter(scope_id="never-read"), AMPLE) == ()


def test_a_passed_deadline_reads_nothing_and_keeps_the_last_reading() -> None:
    now, deadlines = [0.0], []

    def read(scope_ids, doc_ids, deadline):  # type: ignore[no-untyped-def]
        deadlines.append(deadline)
        return ["en", "zh-CN"]

    locales = IndexLocales(read, refresh_s=1.0, clock=lambda: now[0])
    passed = Deadline.after(-1)
    assert locales.current(ScopeFilter(), passed) == ()  # nothing read yet: one list
    assert deadlines == []
    assert locales.current(ScopeFilter(), AMPLE) == ("en", "zh-CN")
    assert deadlines == [AMPLE]  # the read is bounded by the caller's deadline
    now[0] = 2.0
    assert locales.current(ScopeFilter(), passed) == ("en", "zh-CN")
    assert deadlines == [AMPLE]
