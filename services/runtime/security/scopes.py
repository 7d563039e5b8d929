"""Scope checks on a request's contents, made by the servicers with the
caller the interceptor identified (`server_auth.current_caller`). The scope a
caller may touch comes from the server's callers list, never from the
request."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from services.core.errors import InvalidArgument, PermissionDenied
from services.runtime.security.callers import Caller

# How a refusal for a missing scope begins (the gateway recognises it to
# tell the public without its own credential's name and scopes).
SCOPE_REQUIRED = "filter.scope_id: required"


def readable_scope(requested: str, caller: Caller) -> str:
    """The scope a read runs in: the requested one if the caller holds it; the
    caller's only scope when none is requested ("" = every scope, for a
    caller that holds every scope)."""
    grant = caller.scopes
    if requested:
        if not grant.allows(requested):
            raise PermissionDenied(
                f"filter.scope_id: caller {caller.name!r} may not read scope {requested!r} "
                f"(it may read: {grant.describe()})"
            )
        return requested
    if grant.scopes is None:
        return ""
    if grant.sole is not None:
        return grant.sole
    raise InvalidArgument(
        f"{SCOPE_REQUIRED}, caller {caller.name!r} may read several scopes "
        f"({grant.describe()}); name one, or several in filter.scope_ids"
    )


def readable_scopes(requested: Sequence[str], caller: Caller) -> tuple[str, ...]:
    """Several scopes read at once: each must be one the caller holds
    (PermissionDenied naming the first that is not); duplicates dropped."""
    for scope_id in requested:
        if not caller.scopes.allows(scope_id):
            raise PermissionDenied(
                f"filter.scope_ids: caller {caller.name!r} may not read scope {scope_id!r} "
                f"(it may read: {caller.scopes.describe()})"
            )
    return tuple(dict.fromkeys(requested))


def check_writable(scope_ids: Iterable[str], caller: Caller, field: str) -> None:
    """PermissionDenied naming the first scope the caller may not write."""
    for scope_id in scope_ids:
        if not caller.scopes.allows(scope_id):
            raise PermissionDenied(
                f"{field}: caller {caller.name!r} may not write scope {scope_id!r} "
                f"(it may write: {caller.scopes.describe()})"
            )
