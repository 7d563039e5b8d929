"""RetrieverBreaker's state machine on pybreaker (memory storage)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from gateway.breaker import RetrieverBreaker, is_caller_error
from gateway.errors import ApiError, ErrorCode

pytestmark = pytest.mark.unit


class InjectedRpcError(grpc.aio.AioRpcError):
    """Fault injection: an RPC failure with the given code, no server needed."""

    def __init__(self, code: grpc.StatusCode) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="injected")


async def _call(breaker: RetrieverBreaker, error: BaseException | None = None) -> str:
    try:
        async with breaker.guard():
            if error is not None:
                raise error
        return "ok"
    except ApiError as exc:
        return exc.code.value
    except grpc.aio.AioRpcError as exc:
        return exc.code().name


async def test_opens_after_consecutive_failures_and_refuses_without_calling() -> None:
    states: list[str] = []
    breaker = RetrieverBreaker(fail_max=2, reset_s=60, on_state=states.append)
    unavailable = InjectedRpcError(grpc.StatusCode.UNAVAILABLE)
    assert await _call(breaker, unavailable) == "UNAVAILABLE"
    assert await _call(breaker, unavailable) == "UNAVAILABLE"  # the tripping call reports itself
    entered = False
    with pytest.raises(ApiError) as caught:
        async with breaker.guard():
            entered = True
    assert caught.value.code is ErrorCode.BREAKER_OPEN
    assert caught.value.retry_after_s is not None and 55 <= caught.value.retry_after_s <= 60
    assert entered is False
    assert states == ["open"]


async def test_a_success_resets_the_failure_count() -> None:
    breaker = RetrieverBreaker(fail_max=2, reset_s=60)
    unavailable = InjectedRpcError(grpc.StatusCode.UNAVAILABLE)
    await _call(breaker, unavailable)
    await _call(breaker)
    await _call(breaker, unavailable)
    assert breaker.state == "closed"


async def test_half_open_lets_one_probe_through_at_a_time() -> None:
    breaker = RetrieverBreaker(fail_max=1, reset_s=0.05)
    await _call(breaker, InjectedRpcError(grpc.StatusCode.DEADLINE_EXCEEDED))
    await asyncio.sleep(0.1)
    release = asyncio.Event()

    async def slow_probe() -> str:
        async with breaker.guard():
            await release.wait()
        return "ok"

    probe = asyncio.create_task(slow_probe())
    await asyncio.sleep(0.01)
    assert await _call(breaker) == "breaker_open"  # a second caller waits for the probe
    release.set()
    assert await probe == "ok"
    assert breaker.state == "closed"
    assert await _call(breaker) == "ok"


@pytest.mark.parametrize(
    ("error", "is_caller"),
    [
        (InjectedRpcError(grpc.StatusCode.INVALID_ARGUMENT), True),
        (InjectedRpcError(grpc.StatusCode.CANCELLED), True),
        (asyncio.CancelledError(), True),
        (InjectedRpcError(grpc.StatusCode.UNAVAILABLE), False),
        (InjectedRpcError(grpc.StatusCode.INTERNAL), False),
        (InjectedRpcError(grpc.StatusCode.DEADLINE_EXCEEDED), False),
        (RuntimeError("boom"), False),
    ],
)
def test_only_retriever_failures_count(error: BaseException, is_caller: bool) -> None:
    assert is_caller_error(error) is is_caller
