"""`machine_shortage`: a failure that says the machine is short of descriptors,
disk or a writable disk, read from real libraries' own errors."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from services.core.errors import StoreError, machine_shortage

pytestmark = pytest.mark.unit

# tantivy's message for a commit that met EMFILE (as it raised it in the
# writer-recovery test of tests/storage/embedded).
TANTIVY_EMFILE = (
    "Failed to open file for write: 'IoError { io_error: Custom { kind: TooManyOpenFiles, "
    'error: PathError { path: "/data/lexical/.tmpa08I9g", err: Os { code: 24 } } } }'
)


def test_a_full_sqlite_database_is_out_of_disk_space(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "m.sqlite3")
    db.execute("CREATE TABLE t (v TEXT)")
    db.execute("PRAGMA max_page_count = 2")  # the file cannot grow: SQLITE_FULL, for real
    with pytest.raises(sqlite3.OperationalError) as full:
        db.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    assert machine_shortage(full.value) == "out of disk space"


@pytest.mark.parametrize(
    ("error", "shortage"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "out of disk space"),
        (OSError(errno.EMFILE, "Too many open files"), "out of open file descriptors"),
        (OSError(errno.EROFS, "Read-only file system"), "on a read-only file system"),
        (
            sqlite3.OperationalError("attempt to write a readonly database"),
            "on a read-only file system",
        ),
        (ValueError("Schema mismatch: field text"), None),
        (
            OSError(errno.ENOENT, "No such file or directory"),
            "missing its data files (was the data directory removed?)",
        ),
        (OSError(errno.EACCES, "Permission denied"), None),
    ],
)
def test_each_shortage_by_its_code_or_words(error: BaseException, shortage: str | None) -> None:
    assert machine_shortage(error) == shortage


def test_the_cause_of_a_store_error_is_read() -> None:
    try:
        try:
            raise ValueError(TANTIVY_EMFILE)
        except ValueError as native:
            raise StoreError("tantivy: upsert failed") from native
    except StoreError as wrapped:
        assert machine_shortage(wrapped) == "out of open file descriptors"


def test_a_chain_that_loops_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert machine_shortage(first) is None


def test_a_store_whose_files_are_gone_is_missing_its_data_files() -> None:
    # Probe: the data directory removed under a running stack; every Upsert
    # then failed with tantivy's NotFound, answered as INTERNAL.
    native = ValueError(
        "Failed to open file for write: 'IoError { io_error: Os { code: 2, kind: NotFound, "
        'message: "No such file or directory" } }\''
    )
    try:
        try:
            raise native
        except ValueError as exc:
            raise StoreError("tantivy: upsert failed") from exc
    except StoreError as wrapped:
        assert (
            machine_shortage(wrapped) == "missing its data files (was the data directory removed?)"
        )
