"""Error translation shared by the embedded store adapters.

The native libraries raise bare `Exception`s (and, from Rust assertions,
pyo3's `PanicException`, which derives from `BaseException`). Callers must only
ever see the project's error tree, so every native call runs inside
`store_errors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.core.errors import RagError, StoreError, StoreUnavailable


def _is_native_panic(exc: BaseException) -> bool:
    return type(exc).__name__ == "PanicException"


@contextmanager
def store_errors(store_name: str, action: str) -> Iterator[None]:
    """Re-raise native failures as `StoreError`, leaving project errors alone."""
    try:
        yield
    except RagError:
        raise
    except BaseException as exc:
        if not isinstance(exc, Exception) and not _is_native_panic(exc):
            raise
        raise StoreError(f"{store_name}: {action} failed: {exc}") from exc


def check_folder(store_name: str, folder: Path) -> None:
    """A liveness check of an embedded store's files: open files keep
    answering reads after their folder is removed (probe: Retrieve and
    `verify` went on, every write failed, and a restart came up empty), so
    the folder itself is looked at."""
    if not folder.is_dir():
        raise StoreUnavailable(f"{store_name}: its folder {folder} is gone")


@contextmanager
def unavailable_on_failure(store_name: str) -> Iterator[None]:
    """Re-raise any failure of a liveness check as `StoreUnavailable`.

    Only `Exception`s: a native panic is a bug, not an unreachable store."""
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"{store_name}: {exc}") from exc
