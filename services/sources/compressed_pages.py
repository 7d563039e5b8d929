"""Pages saved gzip-compressed (`README.md.gz`, `changelog.html.gz`) are
read as the page they hold.

Debian compresses most documentation it installs under /usr/share/doc
(READMEs, manuals, changelogs, the Debian Reference), and a folder of such
docs handed to `ingest` should index those pages, not skip them as an
unknown format. A name's `.gz` is taken off to find the page's format; the
document keeps the file's own path as its id. Only gzip: it is what
documentation packages use.

Decompression is bounded: a page may decompress to at most the bytes an
uncompressed file may hold (`site_walk.MAX_FILE_BYTES`), so a small file
that would expand without end (a "zip bomb") is refused after reading that
much, as an oversized file is. A corrupt or truncated file is refused with
a reason; either way only that file is left out.
"""

from __future__ import annotations

import errno
import zlib
from pathlib import Path

from services.sources.site_walk import NotRegularFile, open_regular

COMPRESSED_SUFFIX = ".gz"
_GZIP_WINDOW = 16 + zlib.MAX_WBITS  # zlib's wbits for a gzip header and trailer


def is_compressed(name: str) -> bool:
    return name.lower().endswith(COMPRESSED_SUFFIX)


def page_name(name: str) -> str:
    """The name of the page a file holds: without a trailing `.gz`."""
    return name[: -len(COMPRESSED_SUFFIX)] if is_compressed(name) else name


def page_size(path: Path) -> int:
    """The size of the page a file holds, without reading it: for a `.gz`
    file, what its gzip trailer records (the last member's size, modulo
    4 GiB: exact for the single member a packager writes); 0 for a file that
    is no longer a regular one. OSError when it cannot be opened."""
    if not is_compressed(path.name):
        return path.stat().st_size
    try:
        with open_regular(path) as (file, status):
            if status.st_size < 18:  # 18: gzip header + trailer
                return 0
            file.seek(status.st_size - 4)
            return int.from_bytes(file.read(4), "little")
    except NotRegularFile:
        return 0


def page_bytes(name: str, raw: bytes, max_bytes: int) -> bytes:
    """The page's bytes: `raw` itself, or, for a `.gz` name, what it
    decompresses to (every gzip member, as gzip(1) reads them); OSError when
    that is over `max_bytes` or the data is not whole gzip."""
    if not is_compressed(name):
        return raw
    out = bytearray()
    rest = raw
    while True:
        member = zlib.decompressobj(_GZIP_WINDOW)
        try:
            out += member.decompress(rest, max_bytes + 1 - len(out))
        except zlib.error as exc:
            raise OSError(errno.EINVAL, f"not readable as gzip ({exc})") from exc
        if len(out) > max_bytes:
            raise OSError(errno.EFBIG, f"decompresses to over {max_bytes} bytes, the limit")
        if not member.eof:
            raise OSError(errno.EINVAL, "not readable as gzip (the data ends early: truncated)")
        # gzip(1) reads concatenated members, and ignores zero padding after them.
        rest = member.unused_data
        if not rest.strip(b"\0"):
            return bytes(out)
