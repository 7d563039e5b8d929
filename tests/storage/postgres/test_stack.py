"""The real Indexer and Retriever (in one process, on the test stack) with
their storage in PostgreSQL: ingest, retrieve, delete and verify through the
RPCs, and the same answers as the embedded stores give for the same corpus.

The multi-process deployment (separate Indexer and Retriever replicas on one
server) is issue 28's item 3; this is the in-process half of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.contract.genproto.rag.indexer.v1 import indexer_pb2 as ipb
from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb
from services.embedding.embedder import Embedder
from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.settings import StoreSettings
from tests.support.corpus import corpus_documents
from tests.support.postgres import running_postgres
from tests.support.stack import BackgroundStack, free_port

pytestmark = pytest.mark.integration

# The identifier queries also read vector-only hits whole before fusion
# places them (their identifiers are read from their text).
QUERIES = (
    "how do I restore a backup",
    "rate limits",
    "rotate the signing keys",
    "what does status 429 mean",
    "export failed with X7Q-4291",
    "set chunkSize=800",
)


class PostgresStack(BackgroundStack):
    """The test stack with its three storage parts in one PostgreSQL schema."""

    def __init__(self, url: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.postgres_url = url

    def store_settings(self) -> StoreSettings:
        return StoreSettings(POSTGRES_URL=self.postgres_url, POSTGRES_SCHEMA="rag_stack")


@pytest.fixture(scope="module")
def stacks(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[tuple[BackgroundStack, BackgroundStack]]:
    workdir = tmp_path_factory.mktemp("postgres-stack")
    reranker = f"127.0.0.1:{free_port()}"  # closed: every Retrieve shows the fallback
    with running_postgres() as server:
        postgres = PostgresStack(server.url, workdir / "unused", embedder, reranker_addr=reranker)
        embedded = BackgroundStack(workdir / "embedded", embedder, reranker_addr=reranker)
        for stack in (postgres.start(), embedded.start()):
            assert stack.upsert(corpus_documents()).counts.added == len(corpus_documents())
        yield postgres, embedded
        postgres.stop()
        embedded.stop()


def _docs(stack: BackgroundStack, query: str, **fields: Any) -> list[str]:
    reply = stack.retrieve(query, top_k=5, disable_rerank=True, **fields)
    return [hit.doc_id for hit in reply.hits]


def test_the_stack_runs_on_the_postgres_stores(stacks) -> None:
    postgres, _ = stacks
    assert isinstance(postgres.runtime.storage.lexical, PostgresLexicalStore)
    assert not (Path(postgres.data_dir)).exists()  # nothing local


@pytest.mark.parametrize("query", QUERIES)
def test_it_answers_as_the_embedded_stores_do(stacks, query: str) -> None:
    postgres, embedded = stacks
    for channel in (rpb.CHANNEL_LEXICAL, rpb.CHANNEL_VECTOR):
        assert _docs(postgres, query, channels=[channel]) == _docs(
            embedded, query, channels=[channel]
        ), channel
    assert _docs(postgres, query) == _docs(embedded, query)


def test_two_phase_fetch_reads_the_kept_hits_whole(stacks) -> None:
    """PostgreSQL's vector search reads the first phase only; the page's hits
    are read whole afterwards (the `rows` stage) and carry what the embedded
    stores (whole rows in one phase) return for the same chunks."""
    postgres, embedded = stacks

    def rows(stack: BackgroundStack) -> tuple[set[str], dict[str, tuple[str, ...]]]:
        reply = stack.retrieve(
            "restore a backup", top_k=5, disable_rerank=True, channels=[rpb.CHANNEL_VECTOR]
        )
        fields = {h.chunk_id: (h.url, h.title, h.heading_path, h.text) for h in reply.hits}
        return {t.stage for t in reply.timings}, fields

    stages, read = rows(postgres)
    embedded_stages, expected = rows(embedded)
    assert "rows" in stages and "rows" not in embedded_stages
    assert read == expected and all(text for *_, text in read.values())


def test_an_unchanged_corpus_writes_nothing_and_verify_is_clean(stacks) -> None:
    postgres, _ = stacks
    reply = postgres.upsert(corpus_documents())
    assert reply.counts.added == 0 and reply.counts.unchanged == len(corpus_documents())
    report = _verify(postgres)
    assert report.clean and report.committed_generation >= 1


def test_a_deleted_document_leaves_every_channel(stacks) -> None:
    postgres, _ = stacks
    [first, *_] = _docs(postgres, QUERIES[0])
    postgres.indexer.Delete(ipb.DeleteRequest(doc_ids=[first]), timeout=60)
    for channel in (rpb.CHANNEL_LEXICAL, rpb.CHANNEL_VECTOR):
        assert first not in _docs(postgres, QUERIES[0], channels=[channel]), channel
    assert _verify(postgres).clean


def _verify(stack: BackgroundStack) -> ipb.VerifyReport:
    *_, last = stack.indexer.Verify(ipb.VerifyRequest(), timeout=120)
    return last.report
