"""RetrieverBreaker's state machine on pybreaker (memory storage)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from gateway.breaker import Blame, RetrieverBreaker, blame, is_caller_error
from gateway.errors import ApiError, ErrorCode
from rag_client import CallError
from rag_client.errors import error_for

pytestmark = pytest.mark.unit


def injected_error(code: grpc.StatusCode) -> CallError:
    """Fault injection: an RPC failure with the given code, as the Retriever's
    client (rag_client) raises it, no server needed."""
    return error_for(code, "injected", method="Retriever/Retrieve")


async def _call(
    breaker: RetrieverBreaker, error: BaseException | None = None, client: str = ""
) -> str:
    """The code a call through the breaker ends with, "ok" when it succeeds."""
    try:
        async with breaker.guard(client):
            if error is not None:
                raise error
        return "ok"
    except ApiError as exc:
        return exc.code.value
    except CallError as exc:
        return exc.code.name


async def test_opens_after_consecutive_failures_and_refuses_without_calling() -> None:
    states: list[str] = []
    breaker = RetrieverBreaker(fail_max=2, reset_s=60, on_state=states.append)
    unavailable = injected_error(grpc.StatusCode.UNAVAILABLE)
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
    unavailable = injected_error(grpc.StatusCode.UNAVAILABLE)
    await _call(breaker, unavailable)
    await _call(breaker)
    await _call(breaker, unavailable)
    assert breaker.state == "closed"


async def test_half_open_lets_one_probe_through_at_a_time() -> None:
    breaker = RetrieverBreaker(fail_max=1, reset_s=0.05)
    await _call(breaker, injected_error(grpc.StatusCode.UNAVAILABLE))
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
        (injected_error(grpc.StatusCode.INVALID_ARGUMENT), True),
        (injected_error(grpc.StatusCode.CANCELLED), True),
        (asyncio.CancelledError(), True),
        (injected_error(grpc.StatusCode.UNAVAILABLE), False),
        (injected_error(grpc.StatusCode.INTERNAL), False),
        (injected_error(grpc.StatusCode.DEADLINE_EXCEEDED), False),
        (RuntimeError("boom"), False),
    ],
)
def test_only_retriever_failures_count(error: BaseException, is_caller: bool) -> None:
    assert is_caller_error(error) is is_caller


@pytest.mark.parametrize(
    ("code", "blamed"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, Blame.CALLER),
        (grpc.StatusCode.FAILED_PRECONDITION, Blame.CALLER),
        (grpc.StatusCode.PERMISSION_DENIED, Blame.CALLER),
        (grpc.StatusCode.NOT_FOUND, Blame.CALLER),
        (grpc.StatusCode.OUT_OF_RANGE, Blame.CALLER),
        (grpc.StatusCode.UNAVAILABLE, Blame.UPSTREAM),
        (grpc.StatusCode.DEADLINE_EXCEEDED, Blame.UNEXPECTED),
        (grpc.StatusCode.INTERNAL, Blame.UNEXPECTED),
        (grpc.StatusCode.UNKNOWN, Blame.UNEXPECTED),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, Blame.UNEXPECTED),
    ],
)
def test_each_code_is_blamed_on_the_request_the_upstream_or_first_the_client(
    code: grpc.StatusCode, blamed: Blame
) -> None:
    assert blame(injected_error(code)) is blamed


async def _from(breaker: RetrieverBreaker, client: str, error: BaseException | None = None) -> str:
    return await _call(breaker, error, client)


async def test_one_clients_internal_errors_pause_that_client_not_everyone() -> None:
    breaker = RetrieverBreaker(fail_max=3, reset_s=60)
    internal = injected_error(grpc.StatusCode.INTERNAL)
    hostile = [await _from(breaker, "203.0.113.9", internal) for _ in range(100)]
    assert hostile[:3] == ["INTERNAL"] * 3
    assert set(hostile[3:]) == {"breaker_open"}  # its own pause: nothing more reached upstream
    assert breaker.state == "closed"
    assert [await _from(breaker, f"198.51.100.{i}") for i in range(5)] == ["ok"] * 5


async def test_internal_errors_met_by_enough_clients_open_the_breaker_for_all() -> None:
    breaker = RetrieverBreaker(fail_max=3, reset_s=60)
    internal = injected_error(grpc.StatusCode.INTERNAL)
    for client in ("a", "b", "c"):
        assert await _from(breaker, client, internal) == "INTERNAL"
    assert breaker.state == "open"
    assert await _from(breaker, "d") == "breaker_open"


async def test_unavailable_from_one_client_still_opens_it_for_all() -> None:
    breaker = RetrieverBreaker(fail_max=2, reset_s=60)
    unavailable = injected_error(grpc.StatusCode.UNAVAILABLE)
    assert [await _from(breaker, "a", unavailable) for _ in range(2)] == ["UNAVAILABLE"] * 2
    assert await _from(breaker, "b") == "breaker_open"


async def test_rejected_requests_never_count_even_a_hundred() -> None:
    breaker = RetrieverBreaker(fail_max=2, reset_s=60)
    rejected = injected_error(grpc.StatusCode.INVALID_ARGUMENT)
    codes = {await _from(breaker, "a", rejected) for _ in range(100)}
    assert codes == {"INVALID_ARGUMENT"}
    assert (await _from(breaker, "a"), await _from(breaker, "b")) == ("ok", "ok")


async def test_a_repeated_unexpected_error_neither_counts_nor_resets_the_count() -> None:
    """A client's second INTERNAL is not a failure for all, nor a success that
    would hide the upstream failures others meet."""
    breaker = RetrieverBreaker(fail_max=3, reset_s=60)
    unavailable = injected_error(grpc.StatusCode.UNAVAILABLE)
    internal = injected_error(grpc.StatusCode.INTERNAL)
    await _from(breaker, "a", unavailable)
    await _from(breaker, "b", internal)  # b's first: counts (2)
    await _from(breaker, "b", internal)  # b's second: nothing
    assert breaker.state == "closed"
    await _from(breaker, "c", unavailable)  # 3
    assert breaker.state == "open"


async def test_one_clients_timeouts_pause_that_client_not_everyone() -> None:
    """Questions that cost the Retriever more than their deadline (probe 3:
    long Chinese ones, sent inside the rate limit) time out for the client
    that sends them; the circuit stays closed for the others."""
    breaker = RetrieverBreaker(fail_max=3, reset_s=60)
    timeout = injected_error(grpc.StatusCode.DEADLINE_EXCEEDED)
    hostile = [await _from(breaker, "203.0.113.9", timeout) for _ in range(20)]
    assert hostile[:3] == ["DEADLINE_EXCEEDED"] * 3
    assert set(hostile[3:]) == {"breaker_open"}
    assert breaker.state == "closed"
    assert [await _from(breaker, f"198.51.100.{i}") for i in range(5)] == ["ok"] * 5


async def test_timeouts_met_by_enough_clients_open_the_breaker_for_all() -> None:
    breaker = RetrieverBreaker(fail_max=3, reset_s=60)
    timeout = injected_error(grpc.StatusCode.DEADLINE_EXCEEDED)
    for client in ("a", "b", "c"):
        assert await _from(breaker, client, timeout) == "DEADLINE_EXCEEDED"
    assert breaker.state == "open"


async def test_a_serving_health_check_lets_the_next_call_probe_at_once() -> None:
    breaker = RetrieverBreaker(fail_max=1, reset_s=60)
    breaker.retriever_seen_serving()  # while closed: nothing to bring forward
    await _call(breaker, injected_error(grpc.StatusCode.UNAVAILABLE))
    assert await _call(breaker) == "breaker_open"  # the flag did not outlive the closed state
    breaker.retriever_seen_serving()
    await breaker.check()  # no refusal due any more
    assert await _call(breaker, injected_error(grpc.StatusCode.UNAVAILABLE)) == "UNAVAILABLE"
    assert await _call(breaker) == "breaker_open"  # a failed probe waits the whole reset again
    breaker.retriever_seen_serving()
    assert await _call(breaker) == "ok"
    assert breaker.state == "closed"
