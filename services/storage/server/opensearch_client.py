"""OpenSearch plumbing shared by the lexical store and the server-mode manifest:
the client for `OPENSEARCH_URL`, which failures are transient, and bulk writes
with per-item error handling.

The client's own retry loop is switched off (`max_retries=0`): writes are
retried by `ServerCallPolicy` (only the items that failed, with backoff, never
past the caller's deadline), and reads are not retried at all so they stay
inside the caller's deadline. Every request's `request_timeout` is the time
left in the caller's deadline, at most the store's own timeout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import SSLError, TransportError

from services.core.deadline import Deadline
from services.core.errors import StoreError, StoreUnavailable
from services.storage.base import call_budget_s
from services.storage.server.calls import ServerCallPolicy
from services.storage.settings import StoreSettings

_TRANSIENT_STATUS = {429, 502, 503, 504}
_ERRORS_SHOWN = 3


def is_transient_opensearch_error(exc: BaseException) -> bool:
    """Unreachable, overloaded (429 rejections) or restarting nodes; a TLS or
    auth failure is a configuration problem and is not retried."""
    if isinstance(exc, SSLError):
        return False
    if isinstance(exc, OpenSearchConnectionError):
        return True
    if isinstance(exc, TransportError):
        return exc.status_code in _TRANSIENT_STATUS
    return isinstance(exc, TimeoutError)


def connect_opensearch(settings: StoreSettings, **client_options: Any) -> OpenSearch:
    """A client for `OPENSEARCH_URL`. `client_options` go to `OpenSearch` as-is."""
    auth = None
    if settings.opensearch_user:
        password = settings.opensearch_password
        auth = (settings.opensearch_user, password.get_secret_value() if password else "")
    return OpenSearch(
        hosts=[settings.opensearch_url],
        http_auth=auth,
        verify_certs=settings.opensearch_verify_certs,
        ssl_show_warn=settings.opensearch_verify_certs,
        timeout=settings.opensearch_timeout_s,
        max_retries=0,
        retry_on_timeout=False,
        **client_options,
    )


@dataclass(frozen=True)
class BulkAction:
    """One bulk item: `op` is index | create | update | delete; `source` its
    body line; `if_version` = (seq_no, primary_term) for optimistic concurrency."""

    op: str
    doc_id: str
    source: Mapping[str, Any] | None = None
    if_version: tuple[int, int] | None = None


class WriteConflict(StoreError):
    """Another writer changed a document since it was read (409)."""


_Failure = tuple[BulkAction, Mapping[str, Any]]


class BulkWriter:
    """Sends bulk requests and checks every item, not just the `errors` flag.

    Items rejected as transient (429: the node's write queue is full; 503)
    are re-sent alone, with backoff; any other failed item fails the call with
    a `StoreError` naming it. Statuses in `ignored_status` are outcomes, not
    failures (404 for deleting or updating a chunk that is already gone).
    """

    def __init__(
        self,
        client: OpenSearch,
        calls: ServerCallPolicy,
        index: str,
        refresh: str,
        timeout_s: float,
    ) -> None:
        self.client = client
        self.calls = calls
        self.index = index
        self.refresh = refresh
        self.timeout_s = timeout_s

    def write(
        self,
        operation: str,
        actions: Sequence[BulkAction],
        ignored_status: frozenset[int],
        deadline: Deadline,
    ) -> None:
        """Send `actions`, re-sending rejected items within `deadline` (each
        attempt's timeout: the time then left, at most `timeout_s`)."""
        remaining = list(actions)

        def send() -> None:
            nonlocal remaining
            timeout_s = call_budget_s(
                self.calls.store, deadline, self.timeout_s, f"the {operation}"
            )
            try:
                self._send_once(operation, remaining, ignored_status, timeout_s)
            except _ItemsRejected as rejected:
                remaining = rejected.actions  # the next attempt re-sends only these
                raise

        if remaining:
            self.calls.write(operation, send, deadline)

    def _send_once(
        self,
        operation: str,
        actions: list[BulkAction],
        ignored_status: frozenset[int],
        timeout_s: float,
    ) -> None:
        response = self.client.bulk(
            body=bulk_body(actions),
            index=self.index,
            refresh=self.refresh,
            request_timeout=timeout_s,
        )
        if not response.get("errors"):
            return
        retry: list[_Failure] = []
        failed: list[_Failure] = []
        for action, item in zip(actions, response["items"], strict=True):
            result = next(iter(item.values()))
            status = int(result.get("status", 200))
            if status < 300 or status in ignored_status:
                continue
            (retry if status in _TRANSIENT_STATUS else failed).append((action, result))
        if failed:
            conflict = all(result.get("status") == 409 for _, result in failed)
            raise (WriteConflict if conflict else StoreError)(_describe(operation, failed))
        if retry:
            # A StoreUnavailable makes ServerCallPolicy back off and call again.
            raise _ItemsRejected(_describe(operation, retry), [action for action, _ in retry])


class _ItemsRejected(StoreUnavailable):
    def __init__(self, message: str, actions: list[BulkAction]) -> None:
        super().__init__(message)
        self.actions = actions


def bulk_body(actions: Sequence[BulkAction]) -> list[dict[str, Any]]:
    """Action/source line pairs (the client joins them as NDJSON)."""
    lines: list[dict[str, Any]] = []
    for action in actions:
        target: dict[str, Any] = {"_id": action.doc_id}
        if action.if_version is not None:
            target["if_seq_no"], target["if_primary_term"] = action.if_version
        lines.append({action.op: target})
        if action.source is not None:
            lines.append(dict(action.source))
    return lines


def _describe(operation: str, failures: list[_Failure]) -> str:
    shown = "; ".join(
        f"{action.doc_id}: {result.get('status')} {_reason(result)}"
        for action, result in failures[:_ERRORS_SHOWN]
    )
    more = f" (+{len(failures) - _ERRORS_SHOWN} more)" if len(failures) > _ERRORS_SHOWN else ""
    return f"opensearch bulk {operation}: {len(failures)} item(s) failed: {shown}{more}"


def _reason(result: Mapping[str, Any]) -> str:
    error = result.get("error")
    if isinstance(error, Mapping):
        return f"{error.get('type', '')}: {error.get('reason', '')}"
    return str(error or "")
