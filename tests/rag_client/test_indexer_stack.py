"""The Indexer client against the real embedded stack (the test corpus
indexed): stats, dry runs (which write nothing, so the shared stack is left
as it was), the progress stream and verify."""

from __future__ import annotations

import pytest

from rag_client import ClientSettings, IndexerClient, indexer_pb2
from tests.support.corpus import corpus_documents
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


@pytest.fixture
def indexer(embedded_stack: BackgroundStack) -> IndexerClient:
    return IndexerClient(ClientSettings(embedded_stack.indexer_addr, timeout=60.0))


def test_stats_and_a_dry_run_see_the_indexed_corpus(indexer: IndexerClient) -> None:
    corpus = corpus_documents()
    with indexer:
        stats = indexer.stats()
        plan = indexer.upsert(corpus, dry_run=True)
        gone = indexer.delete([corpus[0].doc_id], dry_run=True)
    assert stats.documents >= len(corpus) and stats.chunks >= stats.documents
    assert plan.dry_run and plan.counts.unchanged == len(corpus) and plan.counts.added == 0
    assert gone.dry_run and gone.counts.removed == 1


def test_the_progress_stream_ends_with_the_result(indexer: IndexerClient) -> None:
    corpus = corpus_documents()
    with indexer:
        progress = list(indexer.upsert_stream(corpus, dry_run=True))
    assert progress[-1].result.counts.unchanged == len(corpus)
    assert all(p.documents_total == len(corpus) for p in progress)


def test_verify_reports_the_stores_in_step(indexer: IndexerClient) -> None:
    with indexer:
        phases = list(indexer.verify())
    report = phases[-1].report
    assert report.clean and not report.repair and report.documents >= len(corpus_documents())
    assert [p.phase for p in phases][-1] == "done"


def test_a_document_the_indexer_rejects_is_reported_not_raised(indexer: IndexerClient) -> None:
    nameless = indexer_pb2.Document(doc_id="", text="# T\n\nBody.")
    with indexer:
        plan = indexer.upsert([nameless], dry_run=True)
    assert plan.counts.rejected == 1  # per document, in the response: not a failed call
