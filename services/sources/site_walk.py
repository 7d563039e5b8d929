"""Walking a document folder without ever leaving it.

A symbolic link inside a docs folder can point anywhere: a link to
`/etc/passwd` named `notes.md` once made a system file searchable. So links
are not followed unless the operator asks (`--follow-symlinks`), and even
then a link is followed only when its resolved target lies inside the
resolved root; a link to an outside file or folder, through `..` or an
absolute path, is refused. A link that leads back to a folder on its own way
down (`docs/a/loop -> ..`) is a loop and is refused too, so a walk always
ends. A link into a hidden file or folder is refused as well: hidden stays
hidden. Only regular files are read: a FIFO named `page.md` would block a read
forever. A file is read only if it is still the file the walk listed (same
device and inode): a folder on its path swapped for a link to `/etc` between
the walk and the read would otherwise be followed by the kernel, whatever
O_NOFOLLOW says about the last name. Files over `MAX_FILE_BYTES` are refused
before their bytes are read.

Every refusal is a `LoadError` for that path, never an exception: the rest of
the folder loads. Hidden files and folders (".name") are skipped silently;
files of types the loader does not read are counted, and the walk reports
them as one skipped entry for the folder, naming a few, those likeliest to
be documents first (`inputrc.arrows`, `MAILING-LIST`: a name without a
suffix, or gzip-compressed).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAX_FILE_BYTES = 64 * 1024 * 1024
# Far above what an Indexer takes (2,000,000 characters by default, a few MB of text even
# as HTML markup); the point is that a 2 GB log named `notes.md` is not read into memory.
FOLLOW_HINT = "pass --follow-symlinks to follow links that stay inside the folder"
UNREAD_EXAMPLES = 5


@dataclass(frozen=True)
class LoadError:
    """One source that could not be loaded; `source` is a path or `path:line`.
    `skipped`: left out by rule (a link not followed, a FIFO, another
    rendering of a page loaded once), the same way on every run; else a read failure (a
    permission, a decoding error, a folder that cannot be listed), which may
    hide one (`ingest --sync` then removes nothing)."""

    source: str
    reason: str
    skipped: bool = False


@dataclass(frozen=True)
class SiteFile:
    """A file to load: `relpath` as listed under the root (a followed link
    keeps its own name), `path` the real file to read, `identity` its
    (device, inode) when listed, which the read checks."""

    relpath: str
    path: Path
    identity: tuple[int, int] | None = None


@dataclass(frozen=True)
class _Folder:
    path: Path  # a real path: links are resolved before a folder is entered
    prefix: str  # its relative path under the root, with a trailing "/"
    chain: tuple[Path, ...]  # real paths of the folders on the way down, itself included


def walk_site(
    root: Path, *, wanted: Callable[[str], bool], follow_symlinks: bool = False
) -> list[SiteFile | LoadError]:
    """Files under `root` whose name `wanted` accepts, and the refusals, sorted
    by relative path. `root` itself may be a link: the operator named it."""
    walk = _Walk(root.resolve(strict=True), wanted, follow_symlinks)
    walk.run()
    if walk.unread:
        walk.found.append(LoadError(".", unread_note(walk.unread), skipped=True))
    return sorted(walk.found, key=lambda x: x.relpath if isinstance(x, SiteFile) else x.source)


class _Walk:
    def __init__(self, root: Path, wanted: Callable[[str], bool], follow: bool) -> None:
        self.root, self.wanted, self.follow = root, wanted, follow
        self.found: list[SiteFile | LoadError] = []
        self.pending = [_Folder(root, "", (root,))]
        # Each folder is entered through links once: links that fan out to shared folders
        # (a/x -> b, a/y -> b, b/x -> c, b/y -> c, ...) would otherwise read 2^depth copies.
        self.linked: dict[Path, str] = {}  # real folder -> the first link's relative path
        self.unread: list[str] = []  # regular files of types the loader does not read

    def run(self) -> None:
        # An explicit stack, not recursion: a deep tree cannot hit the recursion limit.
        while self.pending:
            folder = self.pending.pop()
            try:
                with os.scandir(folder.path) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                self.found.append(LoadError(folder.prefix or ".", f"cannot list: {exc.strerror}"))
                continue
            for entry in entries:
                if not entry.name.startswith("."):
                    self._entry(entry, folder)

    def _entry(self, entry: os.DirEntry[str], folder: _Folder) -> None:
        relpath = folder.prefix + entry.name
        path = Path(entry.path)
        if not _is_text(entry.name) and (
            entry.is_symlink() or entry.is_dir(follow_symlinks=False) or self.wanted(entry.name)
        ):
            # Not UTF-8: the name cannot be a document id, a URL or a line of
            # a report (the bytes Python keeps as U+DC80-U+DCFF cannot be written).
            shown = os.fsencode(relpath).decode("utf-8", "backslashreplace")
            self._refuse(shown, "the file name is not UTF-8 text: rename it")
            return
        if entry.is_symlink():
            self._link(path, relpath, folder)
        elif entry.is_dir(follow_symlinks=False):
            self.pending.append(_Folder(path, relpath + "/", (*folder.chain, path)))
        elif self.wanted(entry.name):
            self._file(path, relpath)
        elif entry.is_file(follow_symlinks=False):
            self.unread.append(os.fsencode(relpath).decode("utf-8", "backslashreplace"))

    def _file(self, path: Path, relpath: str) -> None:
        """`path` is real (no link in it), so its own mode is the file's."""
        try:
            status = path.stat(follow_symlinks=False)
        except OSError as exc:
            self._refuse(relpath, f"cannot read: {exc.strerror}")
            return
        if stat.S_ISREG(status.st_mode):
            self.found.append(SiteFile(relpath, path, (status.st_dev, status.st_ino)))
        else:
            self._skip(relpath, "not a regular file (a FIFO, socket or device), skipped")

    def _link(self, link: Path, relpath: str, folder: _Folder) -> None:
        if not self.follow:
            if link.is_dir():
                self._skip(relpath, f"symbolic link to a folder, skipped: {FOLLOW_HINT}")
            elif self.wanted(link.name):
                self._skip(relpath, f"symbolic link, skipped: {FOLLOW_HINT}")
            return
        target = self._resolve(link, relpath)
        if target is None or not (target.is_dir() or self.wanted(link.name)):
            return  # nothing the loader would read, as for a file
        if not target.is_relative_to(self.root):
            self._skip(relpath, f"symbolic link to {target}, outside the folder, refused")
        elif _is_hidden(target.relative_to(self.root)):
            # Hidden stays hidden, whatever name a link gives it (`env.md -> .env`).
            self._skip(relpath, "symbolic link to a hidden file or folder, refused")
        elif target.is_dir():
            self._enter(target, relpath, folder)
        else:
            self._file(target, relpath)

    def _resolve(self, link: Path, relpath: str) -> Path | None:
        """The link's real target, or None (and a refusal) when there is none."""
        try:
            return link.resolve(strict=True)
        except RuntimeError:  # Python < 3.13 reports a loop so
            self._skip(relpath, "symbolic link loop, refused")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self._skip(relpath, "symbolic link loop, refused")
            elif self.wanted(link.name):
                self._skip(relpath, f"broken symbolic link: {exc.strerror}")
        return None

    def _enter(self, target: Path, relpath: str, folder: _Folder) -> None:
        if target in folder.chain:
            shown = target.relative_to(self.root).as_posix() or "."
            self._skip(relpath, f"symbolic link loop: leads back to {shown}, refused")
            return
        if (first := self.linked.get(target)) is not None:
            self._skip(relpath, f"symbolic link to a folder already read through {first}, skipped")
            return
        self.linked[target] = relpath
        self.pending.append(_Folder(target, relpath + "/", (*folder.chain, target)))

    def _refuse(self, relpath: str, reason: str) -> None:
        self.found.append(LoadError(relpath, reason))

    def _skip(self, relpath: str, reason: str) -> None:
        self.found.append(LoadError(relpath, reason, skipped=True))


def unread_note(relpaths: list[str]) -> str:
    """What the report says of the files not read: how many, and a few of
    them, those likeliest to be documents first (no suffix, or gzip:
    `MAILING-LIST`, `COMPAT.gz`)."""

    def likely_text(relpath: str) -> bool:
        name = relpath.rsplit("/", 1)[-1]
        return "." not in name or name.endswith(".gz")

    named = sorted(relpaths, key=lambda relpath: (not likely_text(relpath), relpath))
    shown = ", ".join(named[:UNREAD_EXAMPLES])
    more = f" and {len(relpaths) - UNREAD_EXAMPLES} more" if len(relpaths) > UNREAD_EXAMPLES else ""
    return (
        f"{len(relpaths)} file(s) not read: not of a type the folder loader reads "
        f'(docs/indexing.md, "Loading a folder"): {shown}{more}'
    )


def _is_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


class NotRegularFile(OSError):
    """What was listed as a file is now a FIFO, socket, device or folder."""


@contextmanager
def open_regular(path: Path) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """`path` open for reading, with its status, never following a link that
    replaced the file since the walk nor blocking on a FIFO that did;
    NotRegularFile when it is no longer a regular file, OSError when it
    cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file")
        yield file, status


def read_regular_file(
    path: Path, identity: tuple[int, int] | None = None, max_bytes: int | None = None
) -> tuple[bytes, float]:
    """(the bytes, the modification time) of a regular file (`open_regular`);
    OSError when it cannot be read within `max_bytes`. With `identity`, the
    opened file must be the one listed: O_NOFOLLOW guards only the last name,
    and a folder on the path replaced by a link would lead the open outside
    the root."""
    with open_regular(path) as (file, status):
        if identity is not None and (status.st_dev, status.st_ino) != identity:
            raise OSError(errno.ESTALE, "changed since the folder was listed, not read; run again")
        max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
        if status.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"{status.st_size} bytes, limit is {max_bytes}")
        data = file.read(max_bytes + 1)  # bounded even where st_size is not the truth
        if len(data) > max_bytes:
            raise OSError(errno.EFBIG, f"over {max_bytes} bytes, the limit")
        return data, status.st_mtime
