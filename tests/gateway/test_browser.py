"""The gateway's web page in headless Chromium (Debian's `chromium`, driven by
Playwright over CDP — no browser download): search, numbered citations, the
debug view, "this page" mode, highlighted matches (English and Chinese), and a
page on a disallowed origin that cannot use the API. Screenshots land in
tests/artifacts/ (or $RAG_TEST_ARTIFACTS).

The stack here indexes the shared test corpus plus one Chinese page
(tests/gateway/fixtures), in a stack of its own so the tests that count the
shared corpus's documents are not affected."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as pb
from services.embedding.embedder import Embedder
from tests.gateway.browser_support import ARTIFACTS, answered, search, searched_page
from tests.gateway.support import (
    ALLOWED_ORIGIN,
    RetrieverServer,
    gateway_settings,
    serve_asgi,
    serve_gateway,
    serve_retriever,
)
from tests.support.corpus import BASE_URL, corpus_documents
from tests.support.stack import BackgroundStack, free_port

pytestmark = pytest.mark.browser

QUERY = "What does status 429 with Retry-After mean?"
PAGE_URL = "https://docs.example/rate-limits"


CHINESE_PAGE = Path(__file__).parent / "fixtures" / "zh-search.md"


def chinese_document() -> ipb.Document:
    text = CHINESE_PAGE.read_text(encoding="utf-8")
    return ipb.Document(
        doc_id=CHINESE_PAGE.name,
        url=BASE_URL + CHINESE_PAGE.stem,
        title=text.splitlines()[0].lstrip("# ").strip(),
        locale="zh",
        scope_id="handbook",
        text=text,
        content_type=ipb.CONTENT_TYPE_MARKDOWN,
        metadata={"section": "general"},
    )


@pytest.fixture(scope="module")
def browser_stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    """Indexer + Retriever with the test corpus and the Chinese page; the
    reranker address is a closed port (the fallback path)."""
    stack = BackgroundStack(
        tmp_path_factory.mktemp("browser-stack"),
        embedder,
        reranker_addr=f"127.0.0.1:{free_port()}",
    ).start()
    documents = [*corpus_documents(), chinese_document()]
    assert stack.upsert(documents).counts.added == len(documents)
    # One search before the page's: a fresh stack's first answer (cold query
    # path) outlasted the gateway's deadline on a loaded 2-core CI machine,
    # and the page showed the error instead of hits. A readiness step, not a check.
    stack.retrieve(QUERY, timeout=300, disable_rerank=True)
    yield stack
    stack.stop()


@pytest.fixture
def retriever_addr(browser_stack: BackgroundStack) -> str:
    """The real Retriever (embedded stack with the test corpus indexed)."""
    return browser_stack.retriever_addr


async def _metric(metrics_url: str, name: str) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(metrics_url)).text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, flags=re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def test_page_searches_cites_and_shows_debug(browser: object, retriever_addr: str) -> None:
    settings = gateway_settings(retriever_addr, gateway_allowed_origins=[])
    async with serve_gateway(settings) as gw:
        page = await browser.new_page(viewport={"width": 1000, "height": 1100})  # type: ignore[attr-defined]
        # The module's first search (a cold query path) took over Playwright's
        # 30 s default on a loaded 2-core CI machine: a hang guard, not a bound.
        page.set_default_timeout(120_000)
        await page.goto(f"{gw.url}/")
        await search(page, QUERY)
        first = page.locator(".hit").first
        await first.wait_for()

        assert "Rate limits" in await first.locator("h3").inner_text()
        assert await first.locator(".cite").inner_text() == "[1]"
        snippets = await page.locator(".hit .snippet").all_inner_texts()
        assert any("429" in snippet for snippet in snippets)
        sources = page.locator(".sources li")
        assert await sources.count() >= 1
        assert "docs.example" in (await first.locator(".source").inner_text())

        await page.get_by_role("checkbox", name="Debug").check()
        chips = page.locator(".hit .prov li")
        await chips.first.wait_for()
        chip_texts = await chips.all_inner_texts()
        assert any(re.match(r"(vector|lexical) #\d+", text) for text in chip_texts)
        rerank = await page.locator(".dbg-rerank").inner_text()
        assert re.match(r"(used|not used)", rerank)
        channels = await page.locator(".debug tbody td:first-child").all_inner_texts()
        assert {"vector", "lexical"} <= set(channels)

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "gateway-page.png"
        await page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 10_000


async def test_this_page_mode_searches_only_the_given_page(
    browser: object, retriever_addr: str
) -> None:
    settings = gateway_settings(retriever_addr, gateway_allowed_origins=[])
    async with serve_gateway(settings) as gw:
        page = await browser.new_page()  # type: ignore[attr-defined]
        await page.goto(f"{gw.url}/")
        await page.get_by_role("radio", name="This page").check()
        await page.get_by_role("textbox", name="Page URL").fill(PAGE_URL)
        await search(page, "daily budget")
        await page.locator(".hit").first.wait_for()
        sources = await page.locator(".hit .source").all_inner_texts()
    assert sources and all(text.endswith("docs.example/rate-limits") for text in sources)


FOREIGN_PAGE = """<!doctype html><html><body><pre id="out">running</pre><script>
const gateway = %r;
const out = document.getElementById("out");
const results = [];
async function attempt(label, init) {
  try {
    const response = await fetch(gateway + "/v1/search", init);
    results.push(label + ":status " + response.status + " type " + response.type);
  } catch (error) {
    results.push(label + ":blocked");
  }
}
(async () => {
  await attempt("cors", {method: "POST", headers: {"Content-Type": "application/json"},
                         body: JSON.stringify({query: "rate limits"})});
  // A "simple" request skips the preflight and reaches the server; only the
  // server's own origin check can stop it from costing a search.
  await attempt("simple", {method: "POST", mode: "no-cors",
                           headers: {"Content-Type": "text/plain"},
                           body: JSON.stringify({query: "rate limits"})});
  out.textContent = results.join("\\n");
})();
</script></body></html>"""


async def test_page_on_a_disallowed_origin_cannot_call_the_api(
    browser: object, retriever_addr: str
) -> None:
    settings = gateway_settings(retriever_addr, gateway_allowed_origins=["http://allowed.example"])
    async with serve_gateway(settings) as gw:

        async def foreign(_: object) -> HTMLResponse:
            return HTMLResponse(FOREIGN_PAGE % gw.url)

        calls_before = await _metric(gw.metrics_url, 'gateway_retriever_calls_total{code="OK"}')
        async with serve_asgi(Starlette(routes=[Route("/", foreign)])) as (foreign_url, _):
            page = await browser.new_page()  # type: ignore[attr-defined]
            await page.goto(f"{foreign_url}/")
            out = page.locator("#out")
            await page.wait_for_function("document.getElementById('out').textContent !== 'running'")
            lines = (await out.inner_text()).splitlines()
        rejected = await _metric(
            gw.metrics_url, 'gateway_search_requests_total{outcome="origin_rejected"}'
        )
        calls_after = await _metric(gw.metrics_url, 'gateway_retriever_calls_total{code="OK"}')
    assert lines[0] == "cors:blocked"
    assert lines[1].startswith("simple:status 0 type opaque")  # sent, but refused by the gateway
    assert rejected == 2  # the preflight and the simple request
    assert calls_after == calls_before  # the Retriever saw nothing


STATIC_SITE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Docs</title></head><body style="font-family:sans-serif;margin:2rem"><h1>Rate limits</h1>
<p>A static page that embeds the search widget with one script tag.</p>
<script src="%s/widget.js" defer></script></body></html>"""


async def test_widget_embeds_on_an_allowed_static_site(
    browser: object, retriever_addr: str
) -> None:
    site: dict[str, str] = {}

    async def static_page(_: object) -> HTMLResponse:
        return HTMLResponse(STATIC_SITE % site["gateway"])

    async with serve_asgi(Starlette(routes=[Route("/rate-limits", static_page)])) as (url, _):
        settings = gateway_settings(retriever_addr, gateway_allowed_origins=[url])
        async with serve_gateway(settings) as gw:
            site["gateway"] = gw.url
            page = await browser.new_page(viewport={"width": 900, "height": 800})  # type: ignore[attr-defined]
            await page.goto(f"{url}/rate-limits")
            await page.get_by_role("button", name="Search", exact=True).first.click()
            dialog = page.get_by_role("dialog", name="Search")
            await dialog.get_by_role("searchbox").fill("how long to wait after a 429")
            await dialog.get_by_role("button", name="Search", exact=True).click()
            first = dialog.locator(".hit").first
            await first.wait_for()
            title = await first.locator("h3").inner_text()
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "gateway-widget.png"))
    assert "Rate limits" in title
    assert title.startswith("[1]")


async def _api_highlights(url: str, query: str) -> int:
    """How many highlight spans the API itself returned (to tell a missing
    upstream feature from a rendering fault)."""
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{url}/v1/search", json={"query": query}, headers={"Origin": ALLOWED_ORIGIN}
        )
    response.raise_for_status()
    return sum(len(hit["snippet_highlights"]) for hit in response.json()["hits"])


async def _marks_for(browser: object, retriever_addr: str, query: str, shot: str) -> list[str]:
    """Search on the page; the class and text of every <mark> in the snippets."""
    settings = gateway_settings(retriever_addr, gateway_allowed_origins=[ALLOWED_ORIGIN])
    async with serve_gateway(settings) as gw:
        page = await browser.new_page(viewport={"width": 1000, "height": 900})  # type: ignore[attr-defined]
        await page.goto(f"{gw.url}/")
        await search(page, query)
        await answered(page)
        hits = await page.locator(".hit").count()
        assert hits, f"no hits for {query!r}: {await page.locator('.status').inner_text()}"
        marks = page.locator(".hit .snippet mark")
        found = [
            f"{await mark.get_attribute('class') or ''}:{await mark.inner_text()}"
            for mark in await marks.all()
        ]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
        sent = await _api_highlights(gw.url, query)
    assert found or sent, f"the Retriever returned no highlights for {query!r} (upstream)"
    assert found, f"the API returned {sent} snippet highlights but the page marked none"
    return found


@pytest.mark.parametrize(
    ("query", "identifier"), [("Parquet", False), ("X7Q-4291", True)], ids=["term", "identifier"]
)
async def test_matches_are_marked_in_the_snippets(
    browser: object, retriever_addr: str, query: str, identifier: bool
) -> None:
    found = await _marks_for(browser, retriever_addr, query, f"gateway-marks-{query}.png")
    texts = {entry.split(":", 1)[1].lower() for entry in found}
    assert query.lower() in texts, found
    if identifier:
        assert f"ident:{query.lower()}" in {entry.lower() for entry in found}, found


async def test_chinese_matches_are_marked(browser: object, retriever_addr: str) -> None:
    found = await _marks_for(browser, retriever_addr, "分词", "gateway-marks-zh.png")
    assert "分词" in {entry.split(":", 1)[1] for entry in found}, found


# Astral code points before the matches: UTF-16 offsets would be off by one each.
SCRIPTED_TEXT = "# 标题\n\n😀 表情之后是 **分词** 和 `X7Q-4291` 🎉 <b>not markup</b> end"


async def test_the_widget_marks_code_point_spans_as_text(
    browser: object, retriever: RetrieverServer
) -> None:
    """The rendering alone, with highlights from the scripted Retriever: spans
    over Chinese and after emoji land on the right characters, and hit text
    never becomes markup."""
    spans = [
        (SCRIPTED_TEXT.index(w), len(w), ident)
        for w, ident in [("分词", False), ("X7Q-4291", True)]
    ]
    hit = pb.Hit(
        chunk_id="c-zh",
        doc_id="zh-search.md",
        url="https://docs.example/zh-search",
        title="中文搜索",
        text=SCRIPTED_TEXT,
        rank=1,
        highlights=[pb.Span(start=s, end=s + n, identifier=i) for s, n, i in spans],
    )
    retriever.servicer.reply_with = pb.RetrieveResponse(hits=[hit], query_language="zh")
    settings = gateway_settings(retriever.addr, gateway_allowed_origins=[])
    async with serve_gateway(settings) as gw:
        page = await searched_page(browser, gw.url, "分词 X7Q-4291")
        snippet = page.locator(".hit .snippet").first
        await snippet.wait_for()
        text = await snippet.inner_text()
        marks = [
            (await m.get_attribute("class"), await m.inner_text())
            for m in await snippet.locator("mark").all()
        ]
        tags = await snippet.evaluate("p => Array.from(p.querySelectorAll('*'), e => e.tagName)")
    assert text == "😀 表情之后是 分词 和 X7Q-4291 🎉 <b>not markup</b> end"
    assert marks == [(None, "分词"), ("ident", "X7Q-4291")]
    assert tags == ["MARK", "MARK"]


async def test_a_hit_offers_its_translations_as_safe_links(
    browser: object, retriever: RetrieverServer
) -> None:
    """ "Also in: 中文（中国） / English" under a hit, each language named in
    itself; a URL that is not http(s) is never a link, whatever the API says."""
    hit = pb.Hit(
        chunk_id="c-en",
        doc_id="en/setup.md",
        url="https://docs.example/en/setup",
        title="Setup",
        text="Install the service.",
        rank=1,
        translations=[
            pb.Translation(locale="zh-CN", url="/zh-CN/setup", doc_id="zh-CN/setup.md"),
            pb.Translation(locale="en-GB", url="javascript:alert(1)", doc_id="en-GB/setup.md"),
            pb.Translation(locale="en", url="https://docs.example/en/", doc_id="en/index.md"),
        ],
    )
    bare = pb.Hit(chunk_id="c-2", doc_id="b.md", url="https://docs.example/b", title="B", rank=2)
    retriever.servicer.reply_with = pb.RetrieveResponse(hits=[hit, bare], query_language="en")
    settings = gateway_settings(retriever.addr, gateway_allowed_origins=[])
    async with serve_gateway(settings) as gw:
        page = await searched_page(browser, gw.url, "install")
        offered = page.locator(".hit .translations")
        await offered.first.wait_for()
        text = await offered.first.inner_text()
        links = [
            (await a.inner_text(), await a.get_attribute("href"), await a.get_attribute("lang"))
            for a in await offered.first.locator("a").all()
        ]
        count = await offered.count()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "gateway-translations.png"), full_page=True)
    assert links == [
        ("中文（中国）", f"{gw.url}/zh-CN/setup", "zh-CN"),
        ("English", "https://docs.example/en/", "en"),
    ]
    assert text == "Also in: 中文（中国） / English"
    assert count == 1  # the hit without translations offers none


async def test_a_hit_without_an_address_is_no_link(
    browser: object, retriever: RetrieverServer
) -> None:
    """Probe: an empty URL resolved against the page linked to the page itself."""
    hit = pb.Hit(chunk_id="c-1", doc_id="notes.md", url="", title="Notes", text="Install.", rank=1)
    retriever.servicer.reply_with = pb.RetrieveResponse(hits=[hit], query_language="en")
    settings = gateway_settings(retriever.addr, gateway_allowed_origins=[])
    async with serve_gateway(settings) as gw:
        page = await searched_page(browser, gw.url, "install")
        title = page.locator(".hit h3")
        await title.first.wait_for()
        links = await page.locator(".hit a").count()
        text = await title.first.inner_text()
    assert (text, links) == ("Notes", 0)


async def test_more_results_continue_the_ranking(browser: object, retriever_addr: str) -> None:
    settings = gateway_settings(retriever_addr, gateway_allowed_origins=[])
    async with serve_gateway(settings) as gw:
        page = await searched_page(browser, gw.url, "how do backups work")
        await page.locator(".hit").first.wait_for()
        first = await page.locator(".hit").count()
        more = page.get_by_role("button", name="More results")
        assert await more.is_visible()
        titles_before = await page.locator(".hit h3").all_inner_texts()
        await more.click()
        await page.locator(f".hit >> nth={first}").wait_for()
        snippets = await page.locator(".hit .snippet").all_inner_texts()
        assert len(snippets) > first
        assert len(set(snippets)) == len(snippets)  # nothing repeated
        assert (await page.locator(".hit h3").all_inner_texts())[:first] == titles_before
        later = page.locator(f".hit >> nth={first}")
        assert await later.locator(".cite").count() == 0  # citations belong to page one


async def test_page_says_public_search_is_closed_by_the_release_gate(browser: object) -> None:
    """RAG_GATEWAY_REQUIRE_RELEASE with no passing release check: the page says
    so on load (the gateway's /readyz says "gated"), and a search says the same,
    not a generic error. The Retriever is the scripted one (its IndexStatus
    answers no release record)."""
    async with serve_retriever() as retriever:
        retriever.servicer.index_status = pb.IndexStatusResponse(committed_generation=3)
        settings = gateway_settings(
            retriever.addr, gateway_allowed_origins=[], gateway_require_release=True
        )
        async with serve_gateway(settings) as gw:
            page = await browser.new_page()  # type: ignore[attr-defined]
            await page.goto(f"{gw.url}/")
            status = page.locator(".status")
            closed = "Public search is closed until the current index passes its release check."
            await page.wait_for_function(
                "t => document.querySelector('#search').shadowRoot"
                ".querySelector('.status').textContent === t",
                arg=closed,
            )
            await search(page, QUERY)
            await page.wait_for_timeout(500)
            assert await status.inner_text() == closed
            assert retriever.servicer.calls == 0
