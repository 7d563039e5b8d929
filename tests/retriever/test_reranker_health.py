"""RerankerHealth: a Reranker that is not serving is not called on every
request, is re-checked in the background with a doubling backoff, and is
called again once its health says SERVING.

The unit tests drive time by hand (a fake clock and sleep) and answer the
health Check with a fake; the integration test runs a real grpc.aio server
with the standard health service and a counting stand-in for the Reranker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import grpc
import pytest
import structlog

from services.contract.genproto.rag.reranker.v1 import reranker_pb2 as pb
from services.contract.genproto.rag.reranker.v1 import reranker_pb2_grpc
from services.core.deadline import Deadline
from services.retriever.rerank_client import RERANKER_SERVICE, RerankClient
from services.retriever.reranker_health import RerankerHealth
from services.retriever.reranking import RerankCode, RerankOutcome, RerankStep
from services.runtime.server import GrpcServer, ServerOptions
from tests.retriever.factories import hit

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


class FakeTime:
    """Fake clock and sleep (test-only): time moves only when the test calls
    `advance`, and a sleeper wakes once it has moved far enough."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        self._tick = asyncio.Event()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake = self.now + seconds - 1e-9
        while self.now < wake:
            await self._tick.wait()


class FakeCheck:
    """Fake health Check (test-only): answers `serving`, counts the calls."""

    def __init__(self, serving: bool = False) -> None:
        self.serving = serving
        self.calls = 0

    async def __call__(self, timeout_s: float) -> bool:
        self.calls += 1
        return self.serving


async def settle() -> None:
    """Let the background task run whatever is due (no time passes)."""
    for _ in range(10):
        await asyncio.sleep(0)


@dataclass
class Tracked:
    health: RerankerHealth
    check: FakeCheck
    time: FakeTime


@pytest.fixture
async def tracked() -> AsyncIterator[Tracked]:
    fake_time, check = FakeTime(), FakeCheck()
    health = RerankerHealth(
        check, initial_backoff_s=0.5, max_backoff_s=4.0, clock=fake_time, sleep=fake_time.sleep
    )
    yield Tracked(health, check, fake_time)
    await health.stop()


async def advance(t: Tracked, seconds: float) -> None:
    t.time.advance(seconds)
    await settle()


# --- unit: the state machine, on fake time --------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("code", [UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION])
async def test_a_not_serving_refusal_marks_it_down(tracked: Tracked, code: grpc.StatusCode) -> None:
    assert tracked.health.should_call() and tracked.health.serving
    tracked.health.record_failure(code)
    assert not tracked.health.should_call() and not tracked.health.serving
    assert tracked.health.next_probe_in_s() == pytest.approx(0.5)


@pytest.mark.unit
@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT],
)
async def test_slow_or_one_off_failures_do_not_mark_it_down(
    tracked: Tracked, code: grpc.StatusCode
) -> None:
    for _ in range(5):
        tracked.health.record_failure(code)
    await advance(tracked, 60)
    assert tracked.health.should_call() and tracked.health.serving
    assert tracked.check.calls == 0  # nothing to re-check


@pytest.mark.unit
async def test_no_calls_and_no_check_while_down_before_the_backoff(tracked: Tracked) -> None:
    tracked.health.record_failure(UNAVAILABLE)
    await advance(tracked, 0.4)
    assert not tracked.health.should_call()
    assert tracked.check.calls == 0
    assert tracked.health.next_probe_in_s() == pytest.approx(0.1)


@pytest.mark.unit
async def test_rechecks_after_the_backoff_doubling_up_to_the_max(tracked: Tracked) -> None:
    tracked.health.record_failure(UNAVAILABLE)
    await settle()  # the background task starts, and sleeps
    for calls, waited in enumerate([0.5, 1.0, 2.0, 4.0, 4.0], start=1):
        await advance(tracked, waited)
        assert tracked.check.calls == calls
        assert not tracked.health.should_call()
        assert tracked.health.backoff_s == min(2 * waited, 4.0)
        assert tracked.health.next_probe_in_s() == pytest.approx(tracked.health.backoff_s)
    assert tracked.time.sleeps == pytest.approx([0.5, 1.0, 2.0, 4.0, 4.0, 4.0])


@pytest.mark.unit
async def test_serving_again_resumes_calls_and_stops_checking(tracked: Tracked) -> None:
    tracked.health.record_failure(UNAVAILABLE)
    await advance(tracked, 0.5)  # first Check: still down
    tracked.check.serving = True
    await advance(tracked, 1.0)
    assert tracked.health.should_call() and tracked.health.serving
    assert tracked.health.next_probe_in_s() == 0.0
    await advance(tracked, 60)
    assert tracked.check.calls == 2
    # Recovered: the next outage is re-checked after the shortest wait again.
    tracked.health.record_failure(UNAVAILABLE)
    assert tracked.health.next_probe_in_s() == pytest.approx(0.5)


@pytest.mark.unit
async def test_a_rerank_success_resets_the_backoff(tracked: Tracked) -> None:
    tracked.health.record_failure(UNAVAILABLE)
    await advance(tracked, 0.5)
    await advance(tracked, 1.0)
    assert tracked.health.backoff_s == 2.0
    tracked.health.record_success()  # a call in flight answered after all
    assert tracked.health.should_call() and tracked.health.backoff_s == 0.5
    tracked.health.record_failure(UNAVAILABLE)
    assert tracked.health.next_probe_in_s() == pytest.approx(0.5)
    await advance(tracked, 0.5)  # on the new schedule, not the old prober's
    assert tracked.check.calls == 3


@pytest.mark.unit
async def test_start_checks_once_so_a_loading_reranker_is_known_at_once(tracked: Tracked) -> None:
    await tracked.health.start()
    assert tracked.check.calls == 1 and not tracked.health.should_call()
    tracked.check.serving = True
    await advance(tracked, 0.5)
    assert tracked.health.should_call()


@pytest.mark.unit
async def test_a_check_that_raises_counts_as_not_serving(tracked: Tracked) -> None:
    async def broken(timeout_s: float) -> bool:
        raise RuntimeError("injected")

    health = RerankerHealth(broken, clock=tracked.time, sleep=tracked.time.sleep)
    await health.start()
    assert not health.serving
    await health.stop()


@pytest.mark.unit
async def test_each_change_of_state_is_logged_once(tracked: Tracked) -> None:
    with structlog.testing.capture_logs() as logs:
        for _ in range(5):
            tracked.health.record_failure(UNAVAILABLE)
        await advance(tracked, 0.5)
        tracked.check.serving = True
        await advance(tracked, 1.0)
        for _ in range(5):
            tracked.health.record_success()
    events = [(e["event"], e["log_level"]) for e in logs]
    assert events == [("reranker_not_serving", "warning"), ("reranker_serving_again", "info")]


@pytest.mark.unit
def test_backoffs_must_make_sense() -> None:
    with pytest.raises(ValueError, match="backoff"):
        RerankerHealth(FakeCheck(), initial_backoff_s=2.0, max_backoff_s=1.0)


# --- integration: a real server, NOT_SERVING then SERVING -----------------------

QUERY = "how do I restore the stores from snapshots"
HITS = [hit(f"c{i}", text=f"passage {i}") for i in range(5)]


class CountingReranker(reranker_pb2_grpc.RerankerServicer):
    """Fault-injection fake of the Reranker (test-only): counts Rerank calls
    server-side; refuses them with UNAVAILABLE, as the real one does, until
    `loaded`; then scores the passages in reverse order."""

    def __init__(self) -> None:
        self.loaded = False
        self.calls = 0

    async def Rerank(
        self, request: pb.RerankRequest, context: grpc.aio.ServicerContext
    ) -> pb.RerankResponse:
        self.calls += 1
        if not self.loaded:
            await context.abort(UNAVAILABLE, "reranker model not loaded: loading")
        scores = [float(i) for i in range(len(request.passages))]
        return pb.RerankResponse(scores=scores, scored=len(scores), model="counting-fake")


@dataclass
class Served:
    server: GrpcServer
    fake: CountingReranker
    health: RerankerHealth
    step: RerankStep

    async def run(self) -> RerankOutcome:
        _, outcome = await self.step.run(QUERY, HITS, True, Deadline.after(5.0))
        return outcome

    async def load_model(self) -> None:
        self.fake.loaded = True
        await self.server.set_serving(True)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    # Imported here: the Reranker's servicer module loads torch.
    from services.reranker.servicer import SERVICE_NAME

    assert SERVICE_NAME == RERANKER_SERVICE
    fake = CountingReranker()
    server = GrpcServer(ServerOptions(host="127.0.0.1", port=0), [SERVICE_NAME])
    reranker_pb2_grpc.add_RerankerServicer_to_server(fake, server.server)
    await server.start()  # health NOT_SERVING, as while a model loads
    client = RerankClient(f"127.0.0.1:{server.port}")
    health = RerankerHealth(client.check_health, initial_backoff_s=0.05, max_backoff_s=0.2)
    step = RerankStep(client, candidates=10, budget_ms=2000, margin_ms=10, health=health)
    try:
        yield Served(server, fake, health, step)
    finally:
        await health.stop()
        await client.close()
        await server.stop()


async def poll(condition: Callable[[], Awaitable[bool]], attempts: int = 200) -> bool:
    """True as soon as `condition` holds; bounded, and no duration is asserted."""
    for _ in range(attempts):
        if await condition():
            return True
        await asyncio.sleep(0.02)
    return False


def not_serving(outcome: RerankOutcome) -> bool:
    return (
        outcome.code == RerankCode.UNAVAILABLE
        and outcome.fallback
        and outcome.requested
        and outcome.reason.startswith("reranker not serving")
    )


@pytest.mark.integration
async def test_a_refusal_stops_the_calls_until_health_says_serving(served: Served) -> None:
    outcomes = [await served.run() for _ in range(30)]
    # The first call learns it (a real UNAVAILABLE); the rest are not made.
    assert served.fake.calls <= 2
    assert outcomes[0].code == RerankCode.UNAVAILABLE
    assert outcomes[0].reason.startswith("reranker UNAVAILABLE")
    assert sum(not_serving(o) for o in outcomes) >= len(outcomes) - 2
    assert all(o.code == RerankCode.UNAVAILABLE and not o.used for o in outcomes)

    await served.load_model()

    async def reranked() -> bool:
        return (await served.run()).code == RerankCode.RERANKED

    assert await poll(reranked)
    calls = served.fake.calls
    outcome = await served.run()
    assert outcome.used and not outcome.fallback and outcome.reranked == len(HITS)
    assert served.fake.calls == calls + 1


@pytest.mark.integration
async def test_started_beside_a_loading_reranker_it_never_calls_it(served: Served) -> None:
    await served.health.start()
    assert not served.health.serving
    outcomes = [await served.run() for _ in range(30)]
    assert served.fake.calls == 0
    assert all(not_serving(o) for o in outcomes)

    await served.load_model()

    async def serving_again() -> bool:
        return served.health.should_call()

    assert await poll(serving_again)
    assert (await served.run()).code == RerankCode.RERANKED
    assert served.fake.calls == 1


@pytest.mark.integration
async def test_a_reranker_without_a_health_service_is_called_not_skipped() -> None:
    """A real gRPC server with no health service: it cannot be watched, so it
    counts as serving (were it skipped, it would be skipped forever)."""
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = RerankClient(f"127.0.0.1:{port}")
    try:
        assert await client.check_health(2.0)
    finally:
        await client.close()
        await server.stop(0)
