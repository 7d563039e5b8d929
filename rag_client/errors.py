"""What a call can raise: one base class, one subclass per status code a
caller may want to handle apart, and a catch-all for the rest.

    RagClientError
    ├── InvalidSettings          (also a ValueError) bad ClientSettings / RetryPolicy / TlsSettings
    ├── ClientClosed             a call after close()
    └── CallError                a call failed; .code, .details, .method, .attempts
        ├── InvalidRequest       INVALID_ARGUMENT (.field: the request field the server named)
        ├── Unauthenticated      UNAUTHENTICATED (no, unknown or revoked token)
        ├── PermissionDenied     PERMISSION_DENIED (role or scope not granted)
        ├── NotFound             NOT_FOUND
        ├── ResourceExhausted    RESOURCE_EXHAUSTED (limits, quotas, message sizes)
        ├── DeadlineExceeded     DEADLINE_EXCEEDED (server-side or the client's own deadline)
        ├── FailedPrecondition   FAILED_PRECONDITION (valid, but not in the current state)
        ├── Aborted              ABORTED (a concurrent change came first; run it again)
        ├── Unavailable          UNAVAILABLE, after the retries the policy allowed
        └── OtherCallError       any other code (INTERNAL, UNIMPLEMENTED, CANCELLED, ...)
"""

from __future__ import annotations

import re
from typing import Any

import grpc

_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\[\]]*):")


class RagClientError(Exception):
    """Base of everything this package raises on purpose."""


class InvalidSettings(RagClientError, ValueError):
    """A setting is wrong; `field` names it (e.g. "tls.ca_file")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its own arguments: the default replays only the joined
        # text, so it could not cross a process pool (BrokenProcessPool, probe).
        return type(self), (self.field, self.message)


class ClientClosed(RagClientError):
    """A call on a client after close()."""


class WrongEventLoop(RagClientError, RuntimeError):
    """An asyncio client used from an event loop other than the one it was made
    in, or after that loop closed (gRPC's channel belongs to one loop)."""


class CallError(RagClientError):
    """A call ended with a non-OK status (after any retries)."""

    def __init__(
        self, code: grpc.StatusCode, details: str, *, method: str = "", attempts: int = 1
    ) -> None:
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {details}")
        self.code = code
        self.details = details
        self.method = method
        self.attempts = attempts

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt_call_error, (
            type(self),
            self.code.name,
            self.details,
            self.method,
            self.attempts,
        )


def _rebuilt_call_error(
    cls: type[CallError], code: str, details: str, method: str, attempts: int
) -> CallError:
    # The status by name: grpc.StatusCode members pickle as (int, str) tuples.
    return cls(grpc.StatusCode[code], details, method=method, attempts=attempts)


class InvalidRequest(CallError):
    """INVALID_ARGUMENT. The server's message names the field and the limit,
    e.g. "top_k: 0 is outside 1..50"; `field` is that name ("" if none)."""

    @property
    def field(self) -> str:
        match = _FIELD.match(self.details)
        return match.group(1) if match else ""


class Unauthenticated(CallError):
    """UNAUTHENTICATED: no credential, or a token the server does not know."""


class PermissionDenied(CallError):
    """PERMISSION_DENIED: the caller lacks the role or the scope."""


class NotFound(CallError):
    """NOT_FOUND."""


class ResourceExhausted(CallError):
    """RESOURCE_EXHAUSTED: a limit was hit (request size, rate, quota)."""


class DeadlineExceeded(CallError):
    """DEADLINE_EXCEEDED: the call's deadline passed (on either side)."""


class FailedPrecondition(CallError):
    """FAILED_PRECONDITION: well formed but not servable in the current state
    (e.g. a page token from an older index generation); repeating it
    unchanged does not help."""


class Aborted(CallError):
    """ABORTED: another caller's concurrent change came first (a Sync of the
    same scope); nothing changed, and the whole operation can be run again."""


class Unavailable(CallError):
    """UNAVAILABLE on every attempt the retry policy and the deadline allowed."""


class OtherCallError(CallError):
    """Any other status code; `code` says which."""


_BY_CODE: dict[grpc.StatusCode, type[CallError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
}


def error_for(
    code: grpc.StatusCode, details: str, *, method: str = "", attempts: int = 1
) -> CallError:
    """The exception for a status code (OtherCallError for unlisted codes)."""
    kind = _BY_CODE.get(code, OtherCallError)
    return kind(code, details, method=method, attempts=attempts)


def from_rpc_error(exc: grpc.RpcError, *, method: str = "", attempts: int = 1) -> CallError:
    """Map a grpc.RpcError (sync or aio) to this package's exception."""
    code = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    return error_for(
        code or grpc.StatusCode.UNKNOWN, details or "", method=method, attempts=attempts
    )
