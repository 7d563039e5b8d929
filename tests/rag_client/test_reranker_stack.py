"""RerankerClient and AsyncRerankerClient against a real Reranker serving the
packaged cross-encoder (ms-marco-MiniLM-L-12-v2, int8 ONNX): scores in the
passages' order with the relevant one highest, Info, health, and a caller's
mistake raised as InvalidRequest naming the field."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_client import AsyncRerankerClient, InvalidRequest, RerankerClient
from services.reranker.app import RerankerApp
from services.reranker.settings import DEFAULT_MODEL, RerankerSettings
from services.runtime.settings import load_settings

pytestmark = pytest.mark.integration

QUERY = "How many people live in Berlin?"
RELEVANT = (
    "Berlin had a population of about 3.7 million registered inhabitants in 2023, "
    "making it the most populous city of the European Union."
)
IRRELEVANT = "The Metropolitan Museum of Art in New York holds over two million works of art."
MAX_PASSAGES = 8


@pytest.fixture(scope="module")
def reranker_addr() -> Iterator[str]:
    """The Reranker in its own event loop on a thread, as a separate process would be."""
    settings = load_settings(
        RerankerSettings,
        host="127.0.0.1",
        reranker_port=0,
        rerank_model=DEFAULT_MODEL,
        rerank_max_passages=MAX_PASSAGES,
        shutdown_grace_s=0.5,
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[RerankerApp, int]:
        app = RerankerApp(settings)  # made in the loop that serves it
        port = await app.open_port()
        assert await app.load_model()
        return app, port

    app, port = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=300)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(app.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def test_scores_come_in_the_passages_order_with_the_relevant_one_highest(
    reranker_addr: str,
) -> None:
    with RerankerClient(reranker_addr) as client:
        reply = client.rerank(QUERY, [IRRELEVANT, RELEVANT], deadline=30)
    assert reply.scored == 2 and not reply.partial
    irrelevant, relevant = reply.scores
    assert relevant > irrelevant
    assert reply.model == DEFAULT_MODEL


def test_info_and_health_say_the_packaged_model_serves(reranker_addr: str) -> None:
    with RerankerClient(reranker_addr) as client:
        info = client.info(deadline=10)
        assert client.serving(deadline=10)
    assert info.loaded and info.reason == ""
    assert info.model == DEFAULT_MODEL and info.max_passages == MAX_PASSAGES


def test_too_many_passages_is_an_invalid_request_naming_the_field(reranker_addr: str) -> None:
    with RerankerClient(reranker_addr) as client, pytest.raises(InvalidRequest) as err:
        client.rerank(QUERY, [RELEVANT] * (MAX_PASSAGES + 1), deadline=30)
    assert err.value.field == "passages"
    assert str(MAX_PASSAGES) in err.value.details


async def test_the_async_client_gets_the_same_scores(reranker_addr: str) -> None:
    with RerankerClient(reranker_addr) as client:
        expected = client.rerank(QUERY, [IRRELEVANT, RELEVANT], deadline=30).scores
    async with AsyncRerankerClient(reranker_addr) as client:
        reply = await client.rerank(QUERY, [IRRELEVANT, RELEVANT], deadline=30)
        assert await client.serving(deadline=10)
    assert reply.scores == pytest.approx(expected, abs=1e-4)


def test_the_reranker_example_in_the_docs_runs(
    reranker_addr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (Path(__file__).parents[2] / "docs" / "client.md").read_text()
    section = text.split("## The Reranker\n", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert '"localhost:50053"' in example
    exec(example.replace("localhost:50053", reranker_addr), {})
    # The server's own log lines share stdout here: keep the example's lines.
    printed = [line for line in capsys.readouterr().out.splitlines() if not line[:4].isdigit()]
    assert printed[0] == DEFAULT_MODEL
    scores, partial = printed[1].rsplit("]", 1)
    assert len(scores.strip("[").split(",")) == 2 and partial.strip() == "False"
