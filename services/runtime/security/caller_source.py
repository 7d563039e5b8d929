"""Where the callers come from, re-read while serving so that credentials
rotate without a restart: add the new token's hash next to the old one,
move the clients to the new token, then remove the old hash."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from services.core.errors import ConfigError
from services.core.logging import get_logger
from services.runtime.security.callers import CallerRegistry, load_callers_text

log = get_logger(__name__)

RELOAD_CHECK_S = 1.0  # how often the files are looked at


class CallerSource:
    """The current registry: fixed (environment) or from a file re-read when
    its content, or that of a token file it names, changes. A callers file
    that stops parsing keeps the last good registry (logged) rather than
    locking everyone out; a token file that cannot be read leaves that one
    token out and the rest of the file applies (a revocation elsewhere in
    the file must not wait for it)."""

    def __init__(self, registry: CallerRegistry, path: Path | None = None) -> None:
        self._registry = registry
        self._path = path
        # The token files the current registry was read from: a new token
        # in one of them is a change even while the callers file is unchanged.
        self._watched = registry.token_files
        self._stamp = _stamp(path, self._watched) if path else None
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path) -> CallerSource:
        return cls(load_callers_text(_text(path), _origin(path)), path)

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
            stamp = _stamp(path, self._watched)
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                registry = load_callers_text(_text(path), _origin(path), _unreadable_token)
            except ConfigError as exc:
                log.error("callers_reload_failed", error=str(exc), kept="previous callers")
                return
            if registry.token_files != self._watched:
                self._watched = registry.token_files
                self._stamp = _stamp(path, self._watched)
            self._registry = registry
            log.info("callers_reloaded", path=str(path), callers=len(registry.entries))


def _unreadable_token(where: str, path: str, why: str) -> None:
    log.error("callers_token_file_unreadable", caller=where, path=path, error=why)


def _origin(path: Path) -> str:
    return f"RAG_AUTH_CALLERS_FILE={path}"


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{_origin(path)}: cannot read: {why}") from None


def _stamp(path: Path, token_files: tuple[str, ...]) -> bytes:
    """A digest of what the registry is made of: the callers file's bytes and
    those of its token files. Content, not modification times: a copy that
    keeps the old time (`cp -p`, `rsync -t`) is still a change."""
    digest = hashlib.sha256()
    for name in (str(path), *token_files):
        try:
            with open(name, "rb") as file:
                digest.update(file.read(_MAX_STAMPED))
        except OSError as exc:
            digest.update(f"unreadable {exc.errno}".encode())
        digest.update(b"\0")
    return digest.digest()


# Callers files and tokens are small; a huge file is read at most this far
# for its stamp (its parse then says what is wrong with it).
_MAX_STAMPED = 4 * 1024 * 1024
