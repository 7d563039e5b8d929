"""A section is found under its page's subject: chunks that open with their
own heading are embedded under the titles above them (real model, real stores)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.core.models import ContentType, Document, ScopeFilter
from services.embedding.embedder import Embedder
from services.indexer.app import build_indexing_pipeline
from services.indexer.pipeline import IndexingPipeline
from services.indexer.settings import IndexerSettings
from services.storage.base import unrequested_deadline
from services.storage.factory import open_manifest, open_stores
from services.storage.settings import StoreMode, StoreSettings
from services.storage.storage import Storage

pytestmark = pytest.mark.integration

# Two pages with a section of the same name: only their titles say which
# module waits for a queue, and the logging page's section is the closer
# wording of the question ("waits", "work", "finished").
PAGES = {
    "library/queue.md": (
        "# queue: a synchronized queue class\n\n"
        + "The queue module implements multi-producer, multi-consumer queues for threads. " * 3
        + "\n\n## Waiting\n\nBlocks until all items have been processed.\n"
    ),
    "library/logging.md": (
        "# logging: logging facility\n\n"
        + "The logging module defines functions and classes for flexible event logging. " * 3
        + "\n\n## Waiting\n\nWaits until all its work is finished.\n"
    ),
}


@pytest.fixture(scope="module")
def pipeline(
    tmp_path_factory: pytest.TempPathFactory, e5_embedder: Embedder
) -> Iterator[IndexingPipeline]:
    stores = StoreSettings(
        data_dir=tmp_path_factory.mktemp("parents"), store_mode=StoreMode.EMBEDDED
    )
    vectors, lexical = open_stores(stores, e5_embedder.dim)
    manifest = open_manifest(stores)
    settings = IndexerSettings(
        chunk_target_chars=300, chunk_overlap_chars=50, chunk_max_slack_chars=100
    )
    yield build_indexing_pipeline(settings, e5_embedder, Storage(vectors, lexical, manifest))
    vectors.close()
    lexical.close()
    manifest.close()


def test_the_section_of_the_page_the_question_names_ranks_first(
    pipeline: IndexingPipeline, e5_embedder: Embedder
) -> None:
    docs = [
        Document(doc_id=d, text=t, scope_id="lib", content_type=ContentType.MARKDOWN)
        for d, t in PAGES.items()
    ]
    pipeline.upsert(docs)
    question = "make my program wait until the queue is empty and all its work is done"
    vector = e5_embedder.embed_query(question).tolist()
    hits = pipeline.storage.vectors.search(
        vector, 10, ScopeFilter(scope_id="lib"), deadline=unrequested_deadline()
    )
    sections = [h.chunk for h in hits if h.chunk.heading_path.endswith("> Waiting")]
    assert [c.doc_id for c in sections] == ["library/queue.md", "library/logging.md"]
    assert sections[0].text.startswith("## Waiting")  # the chunk opens with its own heading
