"""Per-client rate limits and the deployment's daily budget, on `limits`.

Both keep their counters in a `limits` storage: in memory for one instance, in
Redis when several instances must share them (`build_storage`). A storage that
cannot answer fails closed: the request is refused with 503, never let through.

`limits` has no token-bucket strategy; a token bucket's two parameters (burst
size and refill rate) map onto two limits checked together, e.g.
`5/second;60/minute`: a client may burst five requests, and is held to sixty a
minute after that. Each limit is a sliding-window counter: two counters per
client and window (constant memory, however busy the client), weighting the
previous window by how much of it still overlaps, so there is no doubling at
window boundaries. (`limits`' exact moving window keeps one entry per request
and, in memory, expires them through a thread hop per client key per request.)
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from limits import RateLimitItem, RateLimitItemPerDay, parse_many
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import FixedWindowRateLimiter, SlidingWindowCounterRateLimiter
from limits.errors import StorageError
from redis.asyncio import ConnectionPool

from gateway.errors import ApiError, ErrorCode

REDIS_TIMEOUT_S = 0.5
Clock = Callable[[], float]


def build_storage(redis_url: str, namespace: str) -> tuple[Storage, ConnectionPool | None]:
    """Memory storage, or Redis storage over a pool the caller closes at shutdown."""
    if not redis_url:
        return MemoryStorage(), None
    pool = ConnectionPool.from_url(
        redis_url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )
    storage = RedisStorage(
        "async+" + redis_url,
        wrap_exceptions=True,
        implementation="redispy",
        key_prefix=namespace,
        connection_pool=pool,  # type: ignore[arg-type]  # documented option, narrow stub
    )
    return storage, pool


def client_key(host: str | None) -> str:
    """The identity limits are counted under: the client address, with IPv6
    addresses grouped by /64 (one host usually owns a whole /64)."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _unavailable() -> ApiError:
    return ApiError(
        ErrorCode.LIMITER_UNAVAILABLE,
        "request limits cannot be checked right now; try again shortly",
        retry_after_s=1,
    )


class ClientRateLimiter:
    """Holds each client to every limit in `rate_limit` (`limits` notation)."""

    def __init__(self, storage: Storage, rate_limit: str, clock: Clock = time.time) -> None:
        self.limiter = SlidingWindowCounterRateLimiter(storage)
        self.items: list[RateLimitItem] = parse_many(rate_limit)
        self.clock = clock

    async def acquire(self, client: str) -> None:
        """Count one request for `client`, or raise 429 saying when to retry."""
        try:
            # Test every limit before hitting any, so a refusal by the sustained
            # limit does not also use up the burst allowance.
            for item in self.items:
                if not await self.limiter.test(item, "client", client):
                    raise await self._limited(item, client)
            for item in self.items:
                if not await self.limiter.hit(item, "client", client):
                    raise await self._limited(item, client)
        except StorageError as exc:
            raise _unavailable() from exc

    async def _limited(self, item: RateLimitItem, client: str) -> ApiError:
        stats = await self.limiter.get_window_stats(item, "client", client)
        wait_s = max(1, math.ceil(stats.reset_time - self.clock()))
        return ApiError(
            ErrorCode.RATE_LIMITED,
            f"too many requests (limit {item}); retry in {wait_s} s",
            retry_after_s=wait_s,
        )


class DailyBudget:
    """Searches forwarded per UTC day, counted across every instance sharing
    the storage. The day is part of the key, so the budget resets at midnight.

    One client may spend at most `client_share` of it: the budget is a cost
    cap for the deployment, and one address staying inside its rate limit
    spent the whole of it in under three hours, which locked every other
    client out until midnight (probe of 2026-12-06)."""

    def __init__(
        self, storage: Storage, per_day: int, client_share: float = 1.0, clock: Clock = time.time
    ) -> None:
        self.limiter = FixedWindowRateLimiter(storage)
        self.item = RateLimitItemPerDay(per_day)
        self.per_client = RateLimitItemPerDay(max(1, math.floor(per_day * client_share)))
        self.clock = clock

    async def spend(self, client: str = "", cost: int = 1) -> None:
        now = datetime.fromtimestamp(self.clock(), UTC)
        day = now.date().isoformat()
        try:
            # The day's budget is looked at first, so that a client's own
            # counter (kept for a day) is made only for searches the budget
            # still allows: at most one per search forwarded, however many
            # addresses ask once it is spent.
            left = await self.limiter.test(self.item, "budget", day, cost=cost)
            own = left and await self.limiter.hit(
                self.per_client, "budget-client", day, client, cost=cost
            )
            allowed = own and await self.limiter.hit(self.item, "budget", day, cost=cost)
        except StorageError as exc:
            raise _unavailable() from exc
        if not allowed:
            whose = "today's search budget is"
            if left and not own:
                share = self.per_client.amount
                whose = f"this client's share of today's search budget ({share}) is"
            raise ApiError(
                ErrorCode.BUDGET_EXHAUSTED,
                f"{whose} used up; it resets at 00:00 UTC",
                retry_after_s=_seconds_to_next_utc_midnight(now),
            )


def _seconds_to_next_utc_midnight(now: datetime) -> int:
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
    return max(1, math.ceil((midnight - now).total_seconds()))
