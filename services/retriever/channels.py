"""Run one retrieval channel under its own timeout and report what happened.

A channel never raises: failures and timeouts become a `ChannelOutcome` with
a status and reason, which is what lets Retrieve degrade instead of failing.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from services.core.errors import DeadlineExceeded
from services.core.models import ScoredChunk
from services.retriever.types import Channel

T = TypeVar("T")


class ChannelStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"


@dataclass
class ChannelOutcome:
    channel: Channel
    status: ChannelStatus
    latency_ms: float = 0.0
    hits: list[ScoredChunk] = field(default_factory=list)
    error: str = ""
    component: str = ""  # which part failed ("embedding" inside the vector channel)
    requested: bool = True  # False: the caller left this channel out on purpose
    by_rule: bool = False  # left out by a documented rule, not by the caller

    @property
    def ok(self) -> bool:
        return self.status is ChannelStatus.OK


def not_requested(channel: Channel) -> ChannelOutcome:
    return ChannelOutcome(channel, ChannelStatus.SKIPPED, error="not requested", requested=False)


def skipped_by_rule(channel: Channel, reason: str) -> ChannelOutcome:
    """Left out by a documented rule (e.g. a language the model does not read):
    a decision, not a failure, so it never counts as degraded."""
    return ChannelOutcome(
        channel, ChannelStatus.SKIPPED, error=reason, requested=False, by_rule=True
    )


async def run_channel(
    channel: Channel,
    executor: Executor,
    fn: Callable[[], list[ScoredChunk]],
    timeout_s: float,
) -> ChannelOutcome:
    """Run the blocking `fn` in `executor`, giving up after `timeout_s`. A call
    that hangs keeps its worker thread, which is why the executor is sized well
    above the number of channels."""
    outcome, _ = await run_channel_with(channel, executor, lambda: (fn(), None), timeout_s, None)
    return outcome


async def run_channel_with(
    channel: Channel,
    executor: Executor,
    fn: Callable[[], tuple[list[ScoredChunk], T]],
    timeout_s: float,
    unanswered: T,
) -> tuple[ChannelOutcome, T]:
    """As `run_channel`, for a search that returns more than its hits (the
    per-locale lists): the outcome and that value, `unanswered` when the
    channel did not answer."""
    if timeout_s <= 0:
        skipped = ChannelOutcome(
            channel, ChannelStatus.SKIPPED, error="no time left in the deadline"
        )
        return skipped, unanswered
    start = time.perf_counter()
    loop = asyncio.get_running_loop()
    try:
        # In the request's context: its log lines carry the request id.
        in_context = functools.partial(contextvars.copy_context().run, fn)
        hits, made = await asyncio.wait_for(loop.run_in_executor(executor, in_context), timeout_s)
    except TimeoutError:
        return _timed_out(channel, start, timeout_s), unanswered
    except Exception as exc:
        return _failed(channel, start, timeout_s, exc), unanswered
    return ChannelOutcome(channel, ChannelStatus.OK, _ms(start), hits=hits), made


def _failed(channel: Channel, start: float, timeout_s: float, exc: Exception) -> ChannelOutcome:
    if _past_deadline(exc):  # the store stopped at the deadline it was given
        return _timed_out(channel, start, timeout_s)
    return ChannelOutcome(
        channel,
        ChannelStatus.ERROR,
        _ms(start),
        error=f"{type(exc).__name__}: {exc}",
        component=getattr(exc, "component", channel.value),
    )


def _timed_out(channel: Channel, start: float, timeout_s: float) -> ChannelOutcome:
    return ChannelOutcome(
        channel,
        ChannelStatus.TIMEOUT,
        _ms(start),
        error=f"timed out after {timeout_s * 1000:.0f} ms",
        component=channel.value,
    )


def _past_deadline(exc: BaseException) -> bool:
    return isinstance(exc, DeadlineExceeded) or isinstance(exc.__cause__, DeadlineExceeded)


class ComponentError(Exception):
    """Wraps a failure with the component that caused it (e.g. the embedder
    inside the vector channel), so the degradation report can name it."""

    def __init__(self, component: str, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.component = component


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def call_as(component: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        raise ComponentError(component, exc) from exc
