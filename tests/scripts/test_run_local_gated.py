"""`RAG_GATEWAY_REQUIRE_RELEASE=true make run`: the launcher tells a gateway
that is up but gated from one that is not up, and the release check it
prints opens the gate.

Real parts throughout: the embedded stack, the gateway with its release gate
(the real `/readyz`), the launcher's own readiness probe, its ingest command
and its `release-check` command. Replaced: the launcher's fixed ports
(addresses given, so tests run side by side) and the demo source: the test
corpus with its golden queries instead of docs/ with scripts/demo_golden.jsonl
(indexing all of docs/ takes minutes on two shared cores; the demo golden
file is checked for shape below)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
import pytest

from gateway.release_gate import STATUS_TTL_S
from scripts import run_local
from services.operator.golden import load_golden
from tests.gateway.support import ALLOWED_ORIGIN, gateway_settings, serve_gateway
from tests.support.release_check import BASE_URL, GOLDEN, copy_corpus, write_golden
from tests.support.stack import BackgroundStack, free_port

pytestmark = pytest.mark.integration


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=run_local.ROOT, capture_output=True, text=True, timeout=600, check=False
    )


async def _search(client: httpx.AsyncClient, url: str) -> httpx.Response:
    body = {"query": "restore from snapshots"}
    return await client.post(f"{url}/v1/search", json=body, headers={"Origin": ALLOWED_ORIGIN})


def test_a_gateway_that_is_not_up_is_neither_ready_nor_gated() -> None:
    assert run_local.gateway_state(f"http://127.0.0.1:{free_port()}") is None
    never = run_local.wait_for_gateway(f"http://127.0.0.1:{free_port()}", 1.0, lambda: None)
    assert never is None


async def test_gated_start_is_up_and_the_printed_release_check_opens_it(
    empty_stack: BackgroundStack, tmp_path: Path
) -> None:
    source = run_local.DemoSource(
        path=copy_corpus(tmp_path / "site"),
        scope="handbook",
        base_url=BASE_URL,
        golden=write_golden(tmp_path / "golden.jsonl", GOLDEN),
    )
    settings = gateway_settings(empty_stack.retriever_addr, gateway_require_release=True)
    async with serve_gateway(settings) as gw, httpx.AsyncClient(timeout=30) as client:
        alive_checks: list[None] = []
        state = await asyncio.to_thread(
            run_local.wait_for_gateway, gw.url, 30, lambda: alive_checks.append(None)
        )
        assert state == run_local.GATED  # up, not "did not become ready"
        assert alive_checks  # the children were watched while waiting

        ingest = await asyncio.to_thread(
            _run, run_local.index_command(empty_stack.indexer_addr, source)
        )
        assert ingest.returncode == 0, ingest.stdout + ingest.stderr
        gated = await _search(client, gw.url)
        assert (gated.status_code, gated.json()["error"]["code"]) == (503, "release_not_current")

        command = run_local.release_check_command(
            tmp_path / "release-checks",
            empty_stack.indexer_addr,
            empty_stack.retriever_addr,
            source,
        )
        check = await asyncio.to_thread(_run, command)
        assert check.returncode == 0, check.stdout + check.stderr

        await asyncio.sleep(STATUS_TTL_S + 0.2)
        assert await asyncio.to_thread(run_local.gateway_state, gw.url) == run_local.READY
        opened = await _search(client, gw.url)
        assert opened.status_code == 200, opened.text
        assert opened.json()["hits"]


def test_the_notice_prints_the_release_check_of_the_demo_corpus(tmp_path: Path) -> None:
    notice = " ".join(run_local.gate_notice(tmp_path).split())
    assert "Public search is CLOSED: RAG_GATEWAY_REQUIRE_RELEASE=true" in notice
    printed = " ".join(run_local.release_check_command(tmp_path / "release-checks"))
    assert printed in notice
    assert "release-check" in printed and "--golden" in printed
    assert printed.index(" ".join(run_local.DemoSource().options())) > 0  # what make run indexed


def test_the_demo_golden_queries_name_pages_of_the_demo_corpus() -> None:
    source = run_local.DemoSource()
    golden = load_golden(source.golden)  # parses and validates every line
    pages = {p.name for p in source.path.glob("*.md")}
    for query in golden.queries:
        assert query.expected_doc_ids and set(query.expected_doc_ids) <= pages, query
