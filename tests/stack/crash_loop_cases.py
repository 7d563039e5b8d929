"""The crash loop's bounds and checks, shared by the embedded and the
PostgreSQL test (two modules, so that two test workers run them side by side:
each takes about ten minutes on a loaded 2-core machine)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.crash_audit import audit
from tests.support.crash_loop import CrashLoop, CrashLoopConfig

# Plus the first start and the audit. 6 kills, 2 or more during start-up or
# recovery: 10 took over 10 minutes a mode in CI on a loaded 2-core machine
# (restarts of ~40-60 s), a sixth of the 90-minute budget for two tests; the
# long version (`make bench-crash`) runs for as long as it is asked to.
LOOP_S = 60.0
MIN_KILLS = 6
TIME_CAP_S = 1800.0  # restarts of a minute or more (a loaded machine) still fit
UPTIME_S = (3.0, 8.0)


def crash_loop(tmp_path: Path, store_env: Mapping[str, str]) -> dict[str, Any]:
    """The loop and its audit. Every restart reuses the session's model builds:
    the stacks inherit RAG_EMBEDDING_CACHE_DIR (tests/conftest.py, model_cache_dir)."""
    config = CrashLoopConfig(
        data_dir=tmp_path / "data",
        log_dir=tmp_path / "logs",
        duration_s=LOOP_S,
        min_kills=MIN_KILLS,
        time_cap_s=TIME_CAP_S,
        uptime_s=UPTIME_S,
        store_env=store_env,
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
