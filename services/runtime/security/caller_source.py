"""Where the callers come from, re-read while serving so that credentials
rotate without a restart: add the new token's hash next to the old one,
move the clients to the new token, then remove the old hash."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.runtime.security.callers import CallerRegistry, load_callers_text

log = get_logger(__name__)

RELOAD_CHECK_S = 1.0  # how often the file's modification time is looked at


class CallerSource:
    """The current registry: fixed (environment) or from a file re-read when
    its modification time or size changes. A file that stops parsing keeps
    the last good registry (logged once) rather than locking everyone out."""

    def __init__(self, registry: CallerRegistry, path: Path | None = None) -> None:
        self._registry = registry
        self._path = path
        self._stamp = _stamp(path) if path else None
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path) -> CallerSource:
        return cls(_read(path), path)

    @classmethod
    def from_text(cls, text: str, origin: str) -> CallerSource:
        return cls(load_callers_text(text, origin))

    def current(self) -> CallerRegistry:
        if self._path is not None and time.monotonic() - self._checked >= RELOAD_CHECK_S:
            self._maybe_reload(self._path)
        return self._registry

    def _maybe_reload(self, path: Path) -> None:
        with self._lock:
            self._checked = time.monotonic()
            stamp = _stamp(path)
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                self._registry = _read(path)
            except ConfigError as exc:
                log.error("callers_reload_failed", error=str(exc), kept="previous callers")
                return
            log.info("callers_reloaded", path=str(path), callers=len(self._registry.entries))


def _read(path: Path) -> CallerRegistry:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"RAG_AUTH_CALLERS_FILE={path}: cannot read: {exc.strerror}") from None
    return load_callers_text(text, f"RAG_AUTH_CALLERS_FILE={path}")


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size
