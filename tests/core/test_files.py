"""`atomic_write`: a file is replaced whole or left as it was."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from services.core.files import atomic_write, atomic_write_bytes, atomic_write_text

pytestmark = pytest.mark.unit


def test_writes_into_a_new_folder_and_returns_the_target(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "model.json"
    assert atomic_write_text(target, '{"a": 1}') == target
    assert target.read_text(encoding="utf-8") == '{"a": 1}'
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.json"]


def test_a_failing_writer_leaves_the_old_file_and_no_sibling(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old")

    def half_then_fail(tmp: Path) -> None:
        tmp.write_text("ne")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(target, half_then_fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_durable_writes_the_same_bytes(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    atomic_write_bytes(target, "报告 ✓".encode(), durable=True)
    assert target.read_bytes() == "报告 ✓".encode()


def test_the_file_gets_the_umask_permissions_not_a_private_temp_file_s(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        target = atomic_write_text(tmp_path / "summary.md", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_concurrent_writers_each_leave_a_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "cache.bin"
    payloads = [bytes([n]) * 200_000 for n in range(8)]
    threads = [
        threading.Thread(target=atomic_write_bytes, args=(target, payload)) for payload in payloads
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert target.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["cache.bin"]
