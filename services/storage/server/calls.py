"""How server-mode adapters call a remote store: retries and error mapping.

Writes are idempotent (stable ids, upserts), so a write that failed with a
transient error (connection refused, overloaded node, 429/503) is safe to
repeat; it is retried with exponential backoff and jitter, within the
caller's deadline when it has one: a retry whose backoff would end past it is
not made (the last error is raised at once). Reads are not retried: the
retriever's deadline is better spent on the other channel than on waiting for
a struggling store. Whatever still fails leaves as
`StoreUnavailable` (transient) or `StoreError` (the store rejected the call),
so callers never see a client library's exception types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from services.core.deadline import Deadline
from services.core.errors import RagError, StoreError, StoreUnavailable
from services.core.logging import get_logger

T = TypeVar("T")
ClientT = TypeVar("ClientT", bound=Any)
log = get_logger(__name__)


class ServerCallPolicy:
    """Retry-and-translate policy for one remote store."""

    def __init__(
        self,
        store: str,
        is_transient: Callable[[BaseException], bool],
        write_attempts: int = 4,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 5.0,
        on_retry: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        # Called before each retry of a write (the Indexer counts them; see
        # `observe_write_retries`).
        self.on_retry = on_retry
        self.is_transient = is_transient
        self.write_attempts = max(1, write_attempts)
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s

    def read(self, operation: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except RagError:
            raise
        except Exception as exc:
            raise self.translate(operation, exc) from exc

    def write(self, operation: str, call: Callable[[], T], deadline: Deadline) -> T:
        """`call`, retried on transient errors; with a `deadline`, no retry
        whose backoff would end past it (`call` sets each attempt's timeout
        from the time then left, see `base.call_budget_s`)."""
        retrying = Retrying(
            stop=stop_after_attempt(self.write_attempts) | _StopBefore(deadline),
            wait=wait_exponential_jitter(
                initial=self.backoff_initial_s,
                max=self.backoff_max_s,
                jitter=self.backoff_initial_s,
            ),
            retry=retry_if_exception(self._retryable),
            before_sleep=self._log_retry(operation),
            reraise=True,
        )
        try:
            return retrying(call)
        except RagError:
            raise
        except Exception as exc:
            raise self.translate(operation, exc) from exc

    def translate(self, operation: str, exc: BaseException) -> RagError:
        message = f"{self.store} {operation} failed: {type(exc).__name__}: {_short(exc)}"
        if self.is_transient(exc):
            return StoreUnavailable(message)
        return StoreError(message)

    def _retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, StoreUnavailable) or (
            not isinstance(exc, RagError) and self.is_transient(exc)
        )

    def _log_retry(self, operation: str) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning(
                "store_write_retry",
                store=self.store,
                operation=operation,
                attempt=state.attempt_number,
                error=type(exc).__name__ if exc else "",
            )
            if self.on_retry is not None:
                self.on_retry()

        return before_sleep


class _StopBefore(stop_base):
    """Stop retrying when the next attempt would start past `deadline`
    (tenacity computes the backoff, `upcoming_sleep`, before asking)."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.deadline.remaining_s() <= retry_state.upcoming_sleep


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "…"


def batched(items: list[T], size: int) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class ServerPart(Generic[ClientT]):
    """The lifecycle every server store shares (the Qdrant vector store, the
    OpenSearch lexical store and the OpenSearch manifest): one client, one
    call policy whose write retries can be observed, closed once, refused
    with StoreUnavailable after that."""

    name: str
    client: ClientT
    _calls: ServerCallPolicy
    _closed: bool

    def observe_write_retries(self, on_retry: Callable[[], None]) -> bool:
        self._calls.on_retry = on_retry
        return True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.close()

    def _live(self) -> ClientT:
        if self._closed:
            raise StoreUnavailable(f"{self.name}: store is closed")
        return self.client
