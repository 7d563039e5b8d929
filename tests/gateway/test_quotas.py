"""Rate limiter, daily budget and client identity over `limits`' memory storage."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from limits.aio.storage import MemoryStorage

from gateway.errors import ApiError, ErrorCode
from gateway.quotas import ClientRateLimiter, DailyBudget, client_key

pytestmark = pytest.mark.unit


async def _refusal(awaitable: object) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await awaitable  # type: ignore[misc]
    return caught.value


async def test_each_client_has_its_own_allowance() -> None:
    limiter = ClientRateLimiter(MemoryStorage(), "2/hour")
    await limiter.acquire("10.0.0.1")
    await limiter.acquire("10.0.0.1")
    refused = await _refusal(limiter.acquire("10.0.0.1"))
    await limiter.acquire("10.0.0.2")  # another client is unaffected
    assert refused.code is ErrorCode.RATE_LIMITED
    assert refused.status == 429
    assert refused.retry_after_s is not None and 1 <= refused.retry_after_s <= 3600


async def test_a_refusal_by_one_limit_does_not_spend_the_other() -> None:
    storage = MemoryStorage()
    limiter = ClientRateLimiter(storage, "10/hour;1/day")
    await limiter.acquire("c")
    for _ in range(3):
        await _refusal(limiter.acquire("c"))
    # Only the one admitted request counted against the per-hour limit.
    stats = await limiter.limiter.get_window_stats(limiter.items[0], "client", "c")
    assert stats.remaining == 9


async def test_budget_is_spent_then_refused_until_midnight_utc() -> None:
    now = datetime(2030, 5, 1, 23, 59, 0, tzinfo=UTC).timestamp()
    budget = DailyBudget(MemoryStorage(), per_day=2, clock=lambda: now)
    await budget.spend()
    await budget.spend()
    refused = await _refusal(budget.spend())
    assert refused.code is ErrorCode.BUDGET_EXHAUSTED
    assert refused.retry_after_s == 60


async def test_budget_starts_afresh_on_a_new_utc_day() -> None:
    clock = {"now": datetime(2030, 5, 1, 12, tzinfo=UTC).timestamp()}
    budget = DailyBudget(MemoryStorage(), per_day=1, clock=lambda: clock["now"])
    await budget.spend()
    await _refusal(budget.spend())
    clock["now"] = datetime(2030, 5, 2, 0, 0, 1, tzinfo=UTC).timestamp()
    await budget.spend()


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        (None, "unknown"),
        ("testclient", "testclient"),
    ],
)
def test_client_key_groups_ipv6_by_64(host: str | None, key: str) -> None:
    assert client_key(host) == key


async def test_one_client_spends_at_most_its_share_of_the_budget() -> None:
    now = datetime(2030, 5, 1, 12, tzinfo=UTC).timestamp()
    budget = DailyBudget(MemoryStorage(), per_day=8, client_share=0.25, clock=lambda: now)
    await budget.spend("a")
    await budget.spend("a")
    refused = await _refusal(budget.spend("a"))
    assert refused.code is ErrorCode.BUDGET_EXHAUSTED
    assert refused.message == (
        "this client's share of today's search budget (2) is used up; it resets at 00:00 UTC"
    )
    for client in ("b", "b", "c", "c", "d", "d"):
        await budget.spend(client)  # the others still search: 8 in all
    everyone = await _refusal(budget.spend("e"))
    assert everyone.message == "today's search budget is used up; it resets at 00:00 UTC"


async def test_a_spent_budget_keeps_no_counter_for_clients_that_come_after() -> None:
    """Each client's counter lives a day: made only for a search the budget
    still allows, they stay as many as the searches forwarded, however many
    addresses (IPv6 /64s are cheap) ask once it is spent."""
    now = datetime(2030, 5, 1, 12, tzinfo=UTC).timestamp()
    storage = MemoryStorage()
    budget = DailyBudget(storage, per_day=2, client_share=0.5, clock=lambda: now)
    await budget.spend("a")
    await budget.spend("b")
    for n in range(50):
        refused = await _refusal(budget.spend(f"late-{n}"))
        assert refused.message.startswith("today's search budget is used up")
    counters = [key for key in storage.storage if "budget-client" in key]
    assert len(counters) == 2
