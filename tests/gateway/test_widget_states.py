"""The widget's state through a search's life, in headless Chromium against
the real gateway (the Retriever is the scripted one: tests/gateway/support.py):
the results shown belong to the last query asked, an answer that never comes
frees the search box, a degraded answer says so without the debug view, a
rate-limited visitor's Search button rests for Retry-After, a failed "More
results" keeps what is shown, and the host page's query string stays home.

Where an answer must be late, lost or broken, Playwright's request routing
injects it (a fault injector, test-only): `page.route` holds, delays or
answers the browser's request before it reaches the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from tests.gateway.browser_support import answered, search
from tests.gateway.support import RetrieverServer, gateway_settings, serve_gateway

pytestmark = pytest.mark.browser

SLOW = "how are documents split into chunks"
FAST = "what does status 429 mean"


@contextlib.asynccontextmanager
async def gateway_page(
    browser: Any,
    retriever: RetrieverServer,
    *,
    route: Any = None,
    path: str = "/",
    viewport: dict[str, int] | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Any, Any]]:
    """(the gateway, a page open on it), the gateway before the scripted
    Retriever with `settings`; `route` handles the page's searches (a fault
    injector) from the first one."""
    config = gateway_settings(retriever.addr, gateway_allowed_origins=[], **settings)
    async with serve_gateway(config) as gw:
        page = await browser.new_page(**({"viewport": viewport} if viewport else {}))
        if route is not None:
            await page.route("**/v1/search", route)
        await page.goto(f"{gw.url}{path}")
        yield gw, page


async def _hrefs(page: Any) -> list[str]:
    return [await a.get_attribute("href") for a in await page.locator(".hit h3 a").all()]


async def _api_hrefs(url: str, query: str) -> list[str]:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(
            f"{url}/v1/search", json={"query": query}, headers={"Origin": url}
        )
    response.raise_for_status()
    return [hit["url"] for hit in response.json()["hits"]]


async def test_a_newer_search_replaces_a_slower_one(
    browser: Any, retriever: RetrieverServer
) -> None:
    """Before: Enter was ignored while a search ran, and the older answer then
    showed under the newer query."""
    released = asyncio.Event()

    async def late_for_slow(route: Any) -> None:  # fault injector: SLOW answers last
        if json.loads(route.request.post_data or "{}").get("query") == SLOW:
            await released.wait()
        await route.continue_()

    async with gateway_page(browser, retriever, route=late_for_slow) as (gw, page):
        await search(page, SLOW)
        await search(page, FAST)  # while SLOW is still out
        await answered(page)
        shown = await _hrefs(page)
        released.set()  # SLOW's answer arrives now, late
        await page.wait_for_timeout(500)
        after = await _hrefs(page)
        status = await page.locator(".status").inner_text()
        expected = await _api_hrefs(gw.url, FAST)
        slow_hits = await _api_hrefs(gw.url, SLOW)
    assert expected and expected != slow_hits
    assert shown == after == expected  # FAST's hits, and the late answer changed nothing
    assert status.endswith("results.") or status.endswith("result.")


async def test_an_answer_that_never_comes_frees_the_search_box(
    browser: Any, retriever: RetrieverServer
) -> None:
    """Before: "Searching…" and a disabled Search button until a reload."""
    hold = asyncio.Event()

    async def never(route: Any) -> None:  # fault injector: the answer never comes
        await hold.wait()
        with contextlib.suppress(Exception):  # the page gave up on it already
            await route.abort()

    async with gateway_page(browser, retriever) as (_, page):
        await page.evaluate("window.RagSearch.timeoutMs = 700")
        await page.route("**/v1/search", never)
        await search(page, FAST)
        await answered(page)
        status = await page.locator(".status").inner_text()
        await page.unroute("**/v1/search")
        hold.set()
        await search(page, FAST)  # the box works again
        await answered(page)
        hits = await page.locator(".hit").count()
    assert status == "No answer came in time. Please try again."
    assert hits > 0


async def test_a_degraded_answer_says_so_without_the_debug_view(
    browser: Any, retriever: RetrieverServer
) -> None:
    hit = pb.Hit(chunk_id="c1", doc_id="a.md", url="https://docs.example/a", title="A", rank=1)
    retriever.servicer.reply_with = pb.RetrieveResponse(
        hits=[hit],
        rerank=pb.RerankOutcome(fallback=True, code="reranker_unavailable", reason="x"),
        degraded=[
            pb.Degradation(component="reranker", reason="x", code="reranker_unavailable"),
            pb.Degradation(component="vector", reason="timeout: 1 s", code="vector_timeout"),
        ],
    )
    async with gateway_page(browser, retriever) as (_, page):
        await search(page, FAST)
        await answered(page)
        status = await page.locator(".status").inner_text()
        debug_shown = await page.locator(".debug").is_visible()
    assert status == (
        "1 result. Semantic search did not answer in time; results may be incomplete. "
        "The reranker is unavailable; results are in their fused order."
    ) or status == (
        "1 result. The reranker is unavailable; results are in their fused order. "
        "Semantic search did not answer in time; results may be incomplete."
    )
    assert not debug_shown


async def test_a_rate_limited_search_button_rests_for_retry_after(
    browser: Any, retriever: RetrieverServer
) -> None:
    async with gateway_page(browser, retriever, gateway_rate_limit="1/minute") as (_, page):
        await search(page, FAST)
        await answered(page)
        await page.get_by_role("searchbox", name="Search query").fill(SLOW)
        await page.get_by_role("searchbox", name="Search query").press("Enter")
        await answered(page)
        refused = await page.locator(".status").inner_text()
        button = page.get_by_role("button", name="Search", exact=True)
        resting = await button.is_disabled()
        await page.get_by_role("searchbox", name="Search query").press("Enter")
        await page.wait_for_timeout(200)
        reminded = await page.locator(".status").inner_text()
    assert refused.startswith("You are searching very quickly. Please wait ")
    assert resting
    assert reminded.startswith("You are searching very quickly. Please wait ")
    assert retriever.servicer.calls == 1  # the second and third never left the page's gate


async def test_a_failed_more_keeps_the_results_shown(
    browser: Any, retriever: RetrieverServer
) -> None:
    """A proxy's HTML error page in answer to "More results": said as such
    (not "could not reach"), and the first page of results stays."""
    hits = [
        pb.Hit(
            chunk_id=f"c{i}",
            doc_id=f"{i}.md",
            url=f"https://docs.example/{i}",
            title=f"Page {i}",
            rank=i,
        )
        for i in (1, 2)
    ]
    retriever.servicer.reply_with = pb.RetrieveResponse(hits=hits, next_page_token="next")

    async def proxy_error(route: Any) -> None:  # fault injector: a broken proxy
        if "page_token" in json.loads(route.request.post_data or "{}"):
            await route.fulfill(
                status=502, body="<html>Bad gateway</html>", content_type="text/html"
            )
        else:
            await route.continue_()

    async with gateway_page(browser, retriever, route=proxy_error) as (_, page):
        await search(page, FAST)
        await answered(page)
        await page.get_by_role("button", name="More results").click()
        await answered(page)
        status = await page.locator(".status").inner_text()
        shown = await page.locator(".hit").count()
        more = await page.get_by_role("button", name="More results").is_enabled()
    assert status == "The search service sent an answer this page cannot read (HTTP 502)."
    assert shown == 2 and more


async def test_the_page_address_leaves_without_its_query_string(
    browser: Any, retriever: RetrieverServer
) -> None:
    private = "/?session=s3cret&email=a%40b.example#top"
    async with gateway_page(browser, retriever, path=private) as (gw, page):
        await search(page, FAST)
        await answered(page)
    sent = retriever.servicer.requests[-1].page_url
    assert sent == f"{gw.url}/"


async def test_long_unbroken_words_wrap_on_a_phone(
    browser: Any, retriever: RetrieverServer
) -> None:
    """Before: a 300-letter word widened a 360 px page to over 1,000 px."""
    word = "Supercalifragilistic" * 15
    hit = pb.Hit(
        chunk_id="c1",
        doc_id="long.md",
        url=f"https://docs.example/{word}",
        title=word,
        heading_path=f"{word} > {word}",
        text=f"{word} {word}",
        rank=1,
    )
    retriever.servicer.reply_with = pb.RetrieveResponse(hits=[hit])
    phone = {"width": 360, "height": 740}
    async with gateway_page(browser, retriever, viewport=phone) as (_, page):
        await search(page, FAST)
        await answered(page)
        width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360
