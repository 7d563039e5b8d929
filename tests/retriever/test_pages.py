"""A page of the final ranking (services.retriever.pages): hits from an
offset, or documents grouped: `top_k` counts documents, each with up to N of
its chunks in rank order, documents ranked by their best chunk. The functions
alone, then through a real stack (real model, real stores) on rank."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from services.embedding.embedder import Embedder
from services.retriever.pages import MAX_GROUP_SIZE, group_by_document, page_of
from services.retriever.types import FusedHit
from tests.retriever.factories import hit, scored
from tests.support.pages import markdown_pages
from tests.support.stack import BackgroundStack


def _hit(chunk_id: str, doc_id: str, score: float) -> FusedHit:
    return FusedHit(scored(chunk_id, score, doc_id).chunk, score)


@pytest.mark.unit
def test_documents_are_ranked_by_their_best_chunk_and_keep_their_chunks_in_order() -> None:
    ranked = [
        _hit("a1", "a", 0.9),
        _hit("b1", "b", 0.8),
        _hit("a2", "a", 0.7),
        _hit("c1", "c", 0.6),
        _hit("a3", "a", 0.5),
        _hit("b2", "b", 0.4),
    ]
    grouped = group_by_document(ranked, groups=2, size=2)
    assert [(h.chunk.chunk_id, h.group) for h in grouped] == [
        ("a1", 1),
        ("a2", 1),
        ("b1", 2),
        ("b2", 2),
    ]
    assert [h.chunk.chunk_id for h in group_by_document(ranked, 5, 1)] == ["a1", "b1", "c1"]
    assert group_by_document([], 3, 2) == []


SECTIONS = {
    "backups.md": [
        "Backups run every night at two o'clock and keep thirty days of snapshots.",
        "To restore a backup, pick a snapshot in the console and choose restore.",
        "A restore from a backup replaces the collection; take a snapshot first.",
    ],
    "migrations.md": [
        "A schema migration rewrites every stored row; restore the backup if it fails.",
        "Migrations run in the background and report progress in the console.",
    ],
    "billing.md": [
        "Invoices are issued on the first day of each month.",
        "The billing page lists every invoice as a PDF.",
    ],
}


def _ranked(*ids: str) -> list[FusedHit]:
    """Hits in rank order; a chunk id's first letter names its document."""
    return [hit(chunk_id, 1.0 / i, doc_id=chunk_id[0]) for i, chunk_id in enumerate(ids, 1)]


@pytest.mark.unit
def test_pages_of_hits_and_of_documents_follow_on() -> None:
    ranked = _ranked("a1", "b1", "a2", "c1", "b2", "d1")
    first, last = page_of(ranked, 0, 4), page_of(ranked, 4, 4)
    assert (first.next_offset, last.next_offset) == (4, None)
    assert [h.chunk.chunk_id for h in first.hits + last.hits] == [
        "a1",
        "b1",
        "a2",
        "c1",
        "b2",
        "d1",
    ]
    grouped = page_of(ranked, 2, 1, group_size=2)  # the third document: c
    assert [(h.chunk.chunk_id, h.group) for h in grouped.hits] == [("c1", 3)]
    assert (grouped.hits_before, grouped.next_offset) == (4, 3)
    assert page_of(ranked, 3, 2, group_size=2).next_offset is None


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[BackgroundStack]:
    stack = BackgroundStack(tmp_path_factory.mktemp("grouping"), embedder).start()
    # Sections of ~900 characters: about one chunk each.
    pages = {
        name: "\n\n".join(
            f"## Part {i}\n\n" + " ".join([sentence] * 12) for i, sentence in enumerate(sections, 1)
        )
        for name, sections in SECTIONS.items()
    }
    docs = markdown_pages(pages, title=lambda path, _: path.removesuffix(".md").title())
    assert stack.upsert(docs).counts.added == len(docs)
    yield stack
    stack.stop()


QUESTION = "how do I restore a backup"


@pytest.mark.integration
def test_grouped_hits_rank_documents_by_their_best_chunk(stack: BackgroundStack) -> None:
    flat = stack.retrieve(QUESTION, top_k=20, max_chunks_per_document=3, disable_rerank=True)
    grouped = stack.retrieve(
        QUESTION,
        top_k=2,
        max_chunks_per_document=3,
        group_by_document=True,
        disable_rerank=True,
    )
    documents = list(dict.fromkeys(hit.doc_id for hit in flat.hits))
    # Groups: the first two documents of the flat ranking, in that order.
    assert [hit.group for hit in grouped.hits] == sorted(hit.group for hit in grouped.hits)
    by_group = {hit.group: hit.doc_id for hit in grouped.hits}
    assert by_group == {1: documents[0], 2: documents[1]}
    assert documents[0] == "backups.md"
    # Each group's chunks: that document's best ones, in the flat order.
    for group, doc_id in by_group.items():
        mine = [h.chunk_id for h in grouped.hits if h.group == group]
        expected = [h.chunk_id for h in flat.hits if h.doc_id == doc_id][:3]
        assert mine == expected
    assert len([h for h in grouped.hits if h.group == 1]) > 1
    assert all(hit.group == 0 for hit in flat.hits)


@pytest.mark.integration
def test_a_group_larger_than_the_limit_is_refused_naming_it(stack: BackgroundStack) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stack.retrieve(QUESTION, max_chunks_per_document=MAX_GROUP_SIZE + 1, group_by_document=True)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_chunks_per_document" in str(caught.value.details())
    assert f"0..{MAX_GROUP_SIZE}" in str(caught.value.details())
