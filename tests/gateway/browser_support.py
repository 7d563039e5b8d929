"""Headless Chromium for the gateway's browser tests (Debian's `chromium`,
driven by Playwright over CDP — no browser download), and the page actions
they share."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(os.environ.get("RAG_TEST_ARTIFACTS", Path(__file__).parents[1] / "artifacts"))


async def search(page: Any, query: str) -> None:
    """Type `query` into the page's search box and press Search."""
    await page.get_by_role("searchbox", name="Search query").fill(query)
    await page.get_by_role("button", name="Search", exact=True).click()


async def answered(page: Any) -> None:
    """Wait until the widget's last search is answered: its result list is no
    longer busy and its status no longer says it is searching."""
    await page.locator(".status").first.wait_for()
    await page.wait_for_function(
        """() => {
            const roots = [document, ...Array.from(document.querySelectorAll('*'),
                e => e.shadowRoot).filter(Boolean)];
            const list = roots.map(r => r.querySelector('.results')).find(Boolean);
            const status = roots.map(r => r.querySelector('.status')).find(Boolean);
            return list && status && !list.hasAttribute('aria-busy')
                && status.textContent !== 'Searching…';
        }"""
    )


async def searched_page(browser: Any, url: str, query: str) -> Any:
    """A new page on the gateway at `url`, with `query` searched."""
    page = await browser.new_page()
    await page.goto(f"{url}/")
    await search(page, query)
    return page


@pytest_asyncio.fixture
async def browser() -> AsyncIterator[object]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`)")
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as playwright:
        instance = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True
        )
        try:
            yield instance
        finally:
            await instance.close()
