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
    ├── Unavailable          a dependency or the service itself cannot serve
    │   └── StoreUnavailable a store cannot be reached
    ├── StoreError           a store rejected or failed an operation
    └── ConfigError          settings are invalid or contradictory (start-up)
"""

from __future__ import annotations


class RagError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidArgument(RagError):
    pass


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


class Unavailable(RagError):
    pass


class StoreUnavailable(Unavailable):
    pass


class StoreError(RagError):
    pass


class ConfigError(RagError):
    pass
