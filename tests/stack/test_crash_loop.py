"""The crash loop as a standing test (issue 37): the real stack SIGKILLed
again and again (some kills before it is ready: during start-up or the
recovery of the run the previous kill cut short) while a writer upserts and a
reader retrieves; then no acknowledged document is lost, none is
half-visible, and `verify` is clean. Embedded stores here; PostgreSQL in
test_crash_loop_postgres.py.

Bounded: about a minute of loop per mode, and at least 6 kills; on a slow
or loaded machine the loop runs longer until it has them (up to a cap that
fails saying so). The long version is `make bench-crash`
(bench/load/crash_loop.py). Nothing is faked: real processes, real stores, a
real PostgreSQL server, real SIGKILLs (tests/support/crash_loop.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stack.crash_loop_cases import TIME_CAP_S, assert_held, crash_loop

pytestmark = [pytest.mark.integration, pytest.mark.long(seconds=71)]


# The loop's own cap, then the first start and the audit (pytest's default: 300 s).
@pytest.mark.timeout(TIME_CAP_S + 900)
def test_the_embedded_stack_holds_under_a_crash_loop(tmp_path: Path) -> None:
    assert_held(crash_loop(tmp_path, {"RAG_STORE_MODE": "embedded"}))
