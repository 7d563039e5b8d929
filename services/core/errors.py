"""The project's exception tree. Core code raises these; the gRPC layer maps
them to status codes in exactly one place (`services.runtime.grpc_errors`).

    RagError
    ├── InvalidArgument      bad input from the caller
    ├── NotFound             a named thing does not exist
    ├── ResourceExhausted    a limit was hit
    ├── DeadlineExceeded     the time budget ran out
    ├── Cancelled            the caller went away; the work was undone
    ├── FailedPrecondition   valid, but not in the current state (e.g. a page
    │                        token from an older index generation)
    ├── Aborted              a concurrent change won; run the whole operation again
    ├── Unavailable          a dependency or the service itself cannot serve
    │   └── StoreUnavailable a store cannot be reached
    ├── StoreError           a store rejected or failed an operation
    └── ConfigError          settings are invalid or contradictory (start-up)
"""

from __future__ import annotations

import errno


class RagError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidArgument(RagError):
    pass


class EmptyDocument(InvalidArgument):
    """A document whose body has nothing to index (white space, or markup,
    comments and front matter only). Refused like any bad input, and told
    apart (error_code EMPTY_DOCUMENT) so that a folder's empty pages, such as
    a static site's front-matter-only section pages, need not fail its load."""

    code = "EMPTY_DOCUMENT"  # a rejected document's error_code


class NotFound(RagError):
    pass


class PermissionDenied(RagError):
    """The caller is known but may not touch this scope or document."""


class ResourceExhausted(RagError):
    pass


class DeadlineExceeded(RagError):
    pass


class Cancelled(RagError):
    """The caller cancelled (or disconnected) before the work committed."""


class FailedPrecondition(RagError):
    """The request is well formed but cannot be served in the current state;
    retrying it unchanged will not help (e.g. a page token whose ranking is
    gone)."""


class Aborted(RagError):
    """Another caller's concurrent change came first (a Sync of the same
    scope); nothing was changed, and the whole operation can be run again."""


class Unavailable(RagError):
    pass


class StoreUnavailable(Unavailable):
    pass


class StoreError(RagError):
    pass


class ConfigError(RagError):
    pass


# What a failure says when the machine, not the request or our code, is short
# of something. The native stores put it only in their message (tantivy:
# "TooManyOpenFiles"; SQLite: "database or disk is full"), so both forms are read.
_SHORTAGES: tuple[tuple[frozenset[int], tuple[str, ...], str], ...] = (
    (
        frozenset({errno.EMFILE, errno.ENFILE}),
        ("too many open files", "toomanyopenfiles"),
        "out of open file descriptors",
    ),
    (
        frozenset({errno.ENOSPC, errno.EDQUOT}),
        ("no space left on device", "storagefull", "or disk is full", "disk quota exceeded"),
        "out of disk space",
    ),
    (
        frozenset({errno.EROFS}),
        ("read-only file system", "readonlyfilesystem", "readonly database"),
        "on a read-only file system",
    ),
    # A store's own files gone under it (its data directory removed while it
    # runs, probe): no request's mistake, and no bug of ours either.
    (
        frozenset({errno.ENOENT}),
        ("no such file or directory",),
        "missing its data files (was the data directory removed?)",
    ),
)


def machine_shortage(exc: BaseException) -> str | None:
    """ "out of disk space" (and the like) when `exc`, or an exception it was
    raised from, says the machine ran short of a resource; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = current.errno if isinstance(current, OSError) else None
        text = str(current).lower()
        for codes, phrases, shortage in _SHORTAGES:
            if code in codes or any(phrase in text for phrase in phrases):
                return shortage
        current = current.__cause__ or current.__context__
    return None
