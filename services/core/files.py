"""Files written whole or not at all: every cache, model build, record and
report the services keep on disk goes through `atomic_write`, so a crash, a
kill or a second process writing the same file never leaves half of one
where a reader expects a whole one."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path


def atomic_write(target: Path, write: Callable[[Path], object], *, durable: bool = False) -> Path:
    """Call `write(tmp)` on a fresh sibling of `target`, then rename it over
    `target` (atomic on one filesystem). Two writers at once each rename a
    whole file; the last one wins. The sibling is created by `write`, not in
    advance, so the file gets the usual permissions (umask), and any writer
    that insists on creating its own output (an ONNX exporter) can. With
    `durable`, the content reaches the disk before the rename (a record that
    must survive a power cut, not only a crash). On any error the sibling is
    removed and the error raised; `target` is left as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        if durable:
            _sync(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def atomic_write_bytes(target: Path, payload: bytes, *, durable: bool = False) -> Path:
    return atomic_write(target, lambda tmp: tmp.write_bytes(payload), durable=durable)


def atomic_write_text(target: Path, text: str, *, durable: bool = False) -> Path:
    return atomic_write(target, lambda tmp: tmp.write_text(text, encoding="utf-8"), durable=durable)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
