"""The crash loop as a standing test (issue 37): the real stack SIGKILLed
again and again (some kills before it is ready: during start-up or the
recovery of the run the previous kill cut short) while a writer upserts and a
reader retrieves; then no acknowledged document is lost, none is
half-visible, and `verify` is clean. Embedded stores and PostgreSQL.

Bounded: about two minutes of loop per mode, and at least 10 kills; on a slow
or loaded machine the loop runs longer until it has them (up to a cap that
fails saying so). The long version is `make bench-crash`
(bench/load/crash_loop.py). Nothing is faked: real processes, real stores, a
real PostgreSQL server, real SIGKILLs (tests/support/crash_loop.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.crash_audit import audit
from tests.support.crash_loop import CrashLoop, CrashLoopConfig
from tests.support.pgvector_probe import HNSW_BROKEN, hnsw_works
from tests.support.postgres import PostgresServer, running_postgres

pytestmark = pytest.mark.integration

LOOP_S = 100.0  # plus the first start and the audit: about 2 minutes a mode
MIN_KILLS = 10
TIME_CAP_S = 1800.0  # restarts of a minute or more (a loaded machine) still fit
UPTIME_S = (3.0, 8.0)


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The model's ONNX export, built by the first start of the first mode
    (never killed) and reused by the second."""
    return {"RAG_EMBEDDING_CACHE_DIR": str(tmp_path_factory.mktemp("models"))}


def crash_loop(
    tmp_path: Path, store_env: Mapping[str, str], stack_env: Mapping[str, str]
) -> dict[str, Any]:
    config = CrashLoopConfig(
        data_dir=tmp_path / "data",
        log_dir=tmp_path / "logs",
        duration_s=LOOP_S,
        min_kills=MIN_KILLS,
        time_cap_s=TIME_CAP_S,
        uptime_s=UPTIME_S,
        store_env=store_env,
        stack_env=stack_env,
    )
    loop = CrashLoop(config)
    try:
        loop.run()
        return audit(loop)
    finally:
        loop.close()


def assert_held(figures: dict[str, Any]) -> None:
    summary = {k: figures[k] for k in ("kills", "acknowledged", "lost", "half_visible")}
    assert figures["kills"] >= MIN_KILLS, summary
    assert figures["kills_during_startup"] >= 1, figures
    assert figures["acknowledged"] > 0, figures  # the writer got through between kills
    assert figures["rejected"] == [], figures  # the driver's documents are valid
    assert (figures["lost"], figures["lost_ids"]) == (0, []), figures
    assert (figures["half_visible"], figures["half_visible_ids"]) == (0, []), figures
    assert figures["unknown_documents"] == [], figures
    assert figures["verify_clean"], figures["verify"]
    assert figures["reader"]["answered"] > 0, figures
    assert figures["reader"]["acknowledged_missed"] == 0, figures


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


# The loop's own cap, then the first start and the audit (pytest's default: 300 s).
@pytest.mark.timeout(TIME_CAP_S + 900)
def test_the_embedded_stack_holds_under_a_crash_loop(
    tmp_path: Path, model_cache: dict[str, str]
) -> None:
    assert_held(crash_loop(tmp_path, {"RAG_STORE_MODE": "embedded"}, model_cache))


@pytest.mark.timeout(TIME_CAP_S + 900)
def test_the_postgres_stack_holds_under_a_crash_loop(
    tmp_path: Path, postgres: PostgresServer, model_cache: dict[str, str]
) -> None:
    # Where pgvector itself crashes (SIGILL on some CPUs) nothing can be
    # written: the test fails saying so, not on a vacuous ledger.
    assert hnsw_works(postgres), HNSW_BROKEN
    store_env = {"POSTGRES_URL": postgres.url, "POSTGRES_SCHEMA": "crash_loop"}
    assert_held(crash_loop(tmp_path, store_env, model_cache))
