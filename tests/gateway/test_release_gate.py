"""RAG_GATEWAY_REQUIRE_RELEASE: searches get 503 `release_not_current` and
/readyz is not ready until the Retriever reports a passing release check for
the generation it serves; the answer is cached briefly and fails closed.

First against the scripted Retriever (each reason, the cache, an old
Retriever), then end to end: the real embedded stack, the real
`release-check` CLI, and a new ingest that closes the gate again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import httpx
import pytest

from gateway.release_gate import STATUS_TTL_S
from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from tests.gateway.support import ALLOWED_ORIGIN, RetrieverServer, gateway_settings, serve_gateway
from tests.support.release_check import GOLDEN, copy_corpus, ingest, release_check, write_golden
from tests.support.stack import BackgroundStack, free_port

pytestmark = pytest.mark.integration

SEARCH = {"query": "what does status 429 mean"}


async def _search(client: httpx.AsyncClient, url: str) -> httpx.Response:
    return await client.post(f"{url}/v1/search", json=SEARCH, headers={"Origin": ALLOWED_ORIGIN})


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (
            pb.IndexStatusResponse(committed_generation=4),
            "no passing release check for index generation 4",
        ),
        (
            pb.IndexStatusResponse(
                committed_generation=4, release_recorded=True, release_generation=4
            ),
            "latest release check failed (generation 4)",
        ),
        (
            pb.IndexStatusResponse(
                committed_generation=4,
                release_recorded=True,
                release_generation=3,
                release_passed=True,
            ),
            "release check is for generation 3, serving 4",
        ),
        (None, "index status unavailable: UNIMPLEMENTED"),  # an older Retriever fails closed
    ],
)
async def test_closed_gate_refuses_searches_and_readiness_naming_the_reason(
    retriever: RetrieverServer, status: pb.IndexStatusResponse | None, reason: str
) -> None:
    retriever.servicer.index_status = status
    settings = gateway_settings(retriever.addr, gateway_require_release=True)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        search = await _search(client, gw.url)
        ready = await client.get(f"{gw.url}/readyz")
        metrics = (await client.get(gw.metrics_url)).text
    assert search.status_code == 503
    assert search.json()["error"] == {
        "code": "release_not_current",
        "message": reason,
        "request_id": search.headers["x-request-id"],
    }
    assert ready.status_code == 503
    assert ready.json() == {
        # Up but gated when the Retriever answers (it does, but for its
        # index status, in the last case).
        "status": "gated",
        "reason": reason,
        "release": {"required": True, "current": False, "reason": reason},
    }
    assert retriever.servicer.calls == 0  # nothing was searched
    assert 'gateway_search_requests_total{outcome="release_not_current"} 1.0' in metrics


@pytest.mark.parametrize(
    ("code", "error", "status"),
    [
        (grpc.StatusCode.UNAVAILABLE, "upstream_unavailable", 502),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "upstream_timeout", 504),
    ],
)
async def test_a_retriever_out_of_reach_is_named_as_such_not_as_an_unchecked_release(
    retriever: RetrieverServer, code: grpc.StatusCode, error: str, status: int
) -> None:
    # Fault injected by the labelled scripted double: its IndexStatus fails.
    retriever.servicer.status_fail_with = code
    settings = gateway_settings(retriever.addr, gateway_require_release=True)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        search = await _search(client, gw.url)
        ready = await client.get(f"{gw.url}/readyz")
    assert (search.status_code, search.json()["error"]["code"]) == (status, error)
    assert search.json()["error"]["message"] == f"index status unavailable: {code.name}"
    assert ready.status_code == 503
    assert ready.json()["release"]["current"] is False
    assert retriever.servicer.calls == 0  # still closed: nothing was searched


async def test_no_retriever_at_all_is_upstream_unavailable() -> None:
    settings = gateway_settings(f"127.0.0.1:{free_port()}", gateway_require_release=True)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        search = await _search(client, gw.url)
    assert (search.status_code, search.json()["error"]["code"]) == (502, "upstream_unavailable")


async def test_open_gate_is_cached_briefly_then_asked_again(retriever: RetrieverServer) -> None:
    retriever.servicer.index_status = pb.IndexStatusResponse(
        committed_generation=4,
        release_recorded=True,
        release_generation=4,
        release_passed=True,
        release_current=True,
    )
    settings = gateway_settings(retriever.addr, gateway_require_release=True)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        first = await asyncio.gather(*(_search(client, gw.url) for _ in range(5)))
        ready = await client.get(f"{gw.url}/readyz")
        assert retriever.servicer.status_calls == 1  # one call for the burst and readyz
        # The index moves on; within the cache lifetime the old answer stands.
        retriever.servicer.index_status = pb.IndexStatusResponse(committed_generation=5)
        still_open = await _search(client, gw.url)
        await asyncio.sleep(STATUS_TTL_S + 0.2)
        closed = await _search(client, gw.url)
    assert [r.status_code for r in first] == [200] * 5 and still_open.status_code == 200
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "release": {"required": True, "current": True, "reason": ""},
    }
    assert closed.status_code == 503
    assert closed.json()["error"]["message"] == "no passing release check for index generation 5"
    assert retriever.servicer.status_calls == 2
    assert retriever.servicer.calls == 6


async def test_not_required_never_asks(retriever: RetrieverServer) -> None:
    async with serve_gateway(gateway_settings(retriever.addr)) as gw, httpx.AsyncClient() as client:
        search = await _search(client, gw.url)
        ready = await client.get(f"{gw.url}/readyz")
    assert search.status_code == 200
    assert ready.json() == {"status": "ready", "release": {"required": False}}
    assert retriever.servicer.status_calls == 0


def _generation(stack: BackgroundStack) -> int:
    return int(stack.indexer.Stats(ipb.StatsRequest(), timeout=30).committed_generation)


async def _closed_with(client: httpx.AsyncClient, url: str, reason: str) -> None:
    search = await _search(client, url)
    ready = await client.get(f"{url}/readyz")
    assert (search.status_code, search.json()["error"]["code"]) == (503, "release_not_current")
    assert search.json()["error"]["message"] == reason
    assert ready.status_code == 503
    assert ready.json()["release"] == {"required": True, "current": False, "reason": reason}


async def test_real_stack_gate_opens_for_a_passing_check_and_closes_on_a_new_generation(
    empty_stack: BackgroundStack, tmp_path: Path
) -> None:
    source = copy_corpus(tmp_path / "site")
    await asyncio.to_thread(ingest, empty_stack, source, "handbook")
    first = _generation(empty_stack)
    golden = write_golden(tmp_path / "golden.jsonl", GOLDEN)
    settings = gateway_settings(empty_stack.retriever_addr, gateway_require_release=True)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=10) as client:
        await _closed_with(client, gw.url, f"no passing release check for index generation {first}")

        done = await asyncio.to_thread(
            release_check, empty_stack, source, "handbook", golden, tmp_path / "out"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        await asyncio.sleep(STATUS_TTL_S + 0.2)
        opened = await _search(client, gw.url)
        ready = await client.get(f"{gw.url}/readyz")
        assert opened.status_code == 200, opened.text
        assert opened.json()["hits"][0]["doc_id"] == "rate-limits.md"
        assert ready.status_code == 200 and ready.json()["release"]["current"] is True

        with (source / "billing.md").open("a", encoding="utf-8") as page:
            page.write("\n## Refunds\n\nRefunds are booked against the next invoice.\n")
        await asyncio.to_thread(ingest, empty_stack, source, "handbook")
        second = _generation(empty_stack)
        assert second > first, "the new ingest did not advance the committed generation"
        await asyncio.sleep(STATUS_TTL_S + 0.2)
        await _closed_with(
            client, gw.url, f"release check is for generation {first}, serving {second}"
        )
