"""The client against the real embedded stack (real gRPC servers, stores and
model, the test corpus indexed): results on rank and content, the server's
own refusals as the client's exceptions, blocking and asyncio alike."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from rag_client import (
    AsyncRetrieverClient,
    ClientSettings,
    InvalidRequest,
    RetrieverClient,
    retriever_pb2,
)
from tests.support.corpus import url_of
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


@pytest.fixture
def client(embedded_stack: BackgroundStack) -> RetrieverClient:
    return RetrieverClient(ClientSettings(embedded_stack.retriever_addr, timeout=30.0))


def test_a_known_error_code_finds_its_page_first(client: RetrieverClient) -> None:
    with client:
        reply = client.retrieve("X7Q-4291", top_k=3)
    assert reply.hits[0].url == url_of("billing.md")
    assert "x7q-4291" in reply.hits[0].exact_identifiers
    assert [h.rank for h in reply.hits] == list(range(1, len(reply.hits) + 1))


def test_keywords_reach_the_server_scope_debug_and_channels(client: RetrieverClient) -> None:
    with client:
        scoped = client.retrieve("restore from snapshots", top_k=2, scope_id="handbook", debug=True)
        elsewhere = client.retrieve("restore from snapshots", scope_id="no-such-scope")
        lexical = client.retrieve(
            "X7Q-4291", top_k=1, channels=[retriever_pb2.CHANNEL_LEXICAL], debug=True
        )
    assert len(scoped.hits) == 2 and {h.scope_id for h in scoped.hits} == {"handbook"}
    assert scoped.debug.normalized_query == "restore from snapshots"
    assert not elsewhere.hits
    assert {m.channel for m in lexical.hits[0].channels} == {retriever_pb2.CHANNEL_LEXICAL}


def test_a_prepared_request_is_sent_as_it_is(client: RetrieverClient) -> None:
    request = retriever_pb2.RetrieveRequest(query="X7Q-4291", top_k=1)
    with client:
        assert client.retrieve(request).hits[0].url == url_of("billing.md")


def test_index_status_reports_the_served_generation(client: RetrieverClient) -> None:
    with client:
        status = client.index_status()
    assert status.committed_generation >= 1


@pytest.mark.parametrize("top_k", [51, -1])
def test_a_top_k_out_of_range_is_an_invalid_request_naming_top_k(
    client: RetrieverClient, top_k: int
) -> None:
    with client, pytest.raises(InvalidRequest) as err:
        client.retrieve("restore a backup", top_k=top_k)
    error = err.value
    assert error.field == "top_k" and error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "top_k" in error.details and "50" in error.details
    assert error.attempts == 1


async def test_the_async_client_gets_the_same_ranking(embedded_stack: BackgroundStack) -> None:
    settings = ClientSettings(embedded_stack.retriever_addr, timeout=30.0)
    async with AsyncRetrieverClient(settings) as client:
        reply = await client.retrieve("X7Q-4291", top_k=3)
        with pytest.raises(InvalidRequest) as err:
            await client.retrieve("q", top_k=51)
    assert reply.hits[0].url == url_of("billing.md")
    assert err.value.field == "top_k"


def test_the_usage_example_in_the_docs_runs(
    embedded_stack: BackgroundStack, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (Path(__file__).parents[2] / "docs" / "client.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'target="localhost:50052"' in example
    exec(example.replace("localhost:50052", embedded_stack.retriever_addr), {})
    printed = capsys.readouterr().out
    assert "[1]" in printed and printed.splitlines()[0].startswith("1 https://docs.example/")


def test_pages_of_one_ranking_follow_each_other(client: RetrieverClient) -> None:
    with client:
        first = client.retrieve("restore a backup", top_k=2)
        second = client.retrieve("restore a backup", top_k=2, page_token=first.next_page_token)
        both = client.retrieve("restore a backup", top_k=4)
        with pytest.raises(InvalidRequest) as err:
            client.retrieve("restore a backup", top_k=2, page_token="not-a-token")
    assert first.next_page_token
    paged = [h.chunk_id for h in (*first.hits, *second.hits)]
    assert paged == [h.chunk_id for h in both.hits]
    assert err.value.field == "page_token", err.value.details


def test_the_running_retriever_says_it_serves(client: RetrieverClient) -> None:
    with client:
        assert client.serving() is True
