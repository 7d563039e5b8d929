"""The second phase of a two-phase fetch (services.retriever.hit_rows), on
real embedded stores (Qdrant Edge + tantivy) and first-phase hits made from
their rows; a store that fails is a labelled fault-injection wrapper around
the real one. The PostgreSQL stack reads both phases for real
(tests/storage/postgres/test_stack.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.core.deadline import Deadline
from services.core.errors import DeadlineExceeded, StoreUnavailable, Unavailable
from services.core.models import Chunk, ScopeFilter, StoredChunk
from services.retriever.hit_rows import HitRows
from services.retriever.types import Channel, FusedHit
from services.storage.base import LexicalStore, VectorStore, unrequested_deadline
from services.storage.embedded.stores import open_embedded_stores

pytestmark = pytest.mark.integration

DIM = 4


def _chunk(n: int, generation: int = 1) -> Chunk:
    return Chunk(
        chunk_id=f"c{n}",
        doc_id=f"doc-{n}",
        position=0,
        text=f"body of chunk {n} about ports",
        content_hash=f"h{n}",
        url=f"https://docs.test/{n}",
        title=f"Title {n}",
        heading_path=f"Guide > {n}",
        scope_id="docs",
        locale="en",
        generation=generation,
    )


def _vector(n: int) -> list[float]:
    return [1.0, n / 10, 0.0, 0.0]


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[VectorStore, LexicalStore]]:
    vectors, lexical = open_embedded_stores(tmp_path, DIM)
    chunks = [_chunk(n) for n in range(6)]
    vectors.upsert(chunks, [_vector(n) for n in range(6)], deadline=unrequested_deadline())
    lexical.upsert(chunks, deadline=unrequested_deadline())
    yield vectors, lexical
    vectors.close()
    lexical.close()


class FailingGet:
    """Fault injection (a fake only to fail): the real store, whose `get` raises."""

    def __init__(self, store: VectorStore | LexicalStore) -> None:
        self.store, self.name = store, f"failing {store.name}"

    def get(self, chunk_ids: Sequence[str], deadline: Deadline) -> list[StoredChunk]:
        raise StoreUnavailable(f"{self.name}: connection refused")


def _first_phase_hits(vectors: VectorStore) -> list[FusedHit]:
    """The store's hits as a server store's first phase returns them (Qdrant
    Edge reads whole rows: measured as cheap as the first phase alone)."""
    hits = vectors.search([1.0, 0.0, 0.0, 0.0], 6, ScopeFilter(), deadline=unrequested_deadline())
    return [FusedHit(_first_phase(hit.chunk), 1.0 / (rank + 1)) for rank, hit in enumerate(hits)]


def _first_phase(row: StoredChunk) -> StoredChunk:
    blank = {"text": "", "url": "", "title": "", "heading_path": "", "content_hash": ""}
    return dataclasses.replace(row, **blank, partial=True)


def _complete(
    vectors: object, lexical: object, hits: list[FusedHit], **kwargs: object
) -> list[FusedHit]:
    with ThreadPoolExecutor(2) as pool:
        rows = HitRows(vectors, lexical, pool)  # type: ignore[arg-type]
        deadline = kwargs.pop("deadline", Deadline.after(10.0))
        return asyncio.run(rows.complete(hits, deadline, **kwargs))  # type: ignore[arg-type]


def test_complete_reads_whole_rows_in_rank_order(stores) -> None:
    vectors, lexical = stores
    hits = _first_phase_hits(vectors)
    done = _complete(vectors, lexical, hits, visible_generation=None)
    # The same hits in the same (rank) order, now with what an answer quotes and cites.
    assert [hit.chunk.chunk_id for hit in done] == [hit.chunk.chunk_id for hit in hits]
    assert [hit.chunk.chunk_id for hit in done] == ["c0", "c1", "c2", "c3", "c4", "c5"]
    for hit in done:
        n = int(hit.chunk.chunk_id[1:])
        assert not hit.chunk.partial
        expected = (f"body of chunk {n} about ports", f"Title {n}", f"https://docs.test/{n}")
        assert (hit.chunk.text, hit.chunk.title, hit.chunk.url) == expected
        assert hit.chunk.heading_path == f"Guide > {n}"


def test_whole_rows_are_left_as_they_are(stores) -> None:
    vectors, lexical = stores
    whole = [
        FusedHit(row, 1.0) for row in lexical.get(["c1", "c2"], deadline=unrequested_deadline())
    ]
    # No read at all: stores that would fail are never asked.
    done = _complete(FailingGet(vectors), FailingGet(lexical), whole, visible_generation=None)
    assert done == whole


def test_a_row_rewritten_by_an_uncommitted_run_is_dropped(stores) -> None:
    vectors, lexical = stores
    hits = _first_phase_hits(vectors)  # all generation 1, visible
    later = dataclasses.replace(_chunk(2, generation=2), text="not committed yet")
    vectors.upsert([later], [_vector(2)], deadline=unrequested_deadline())
    lexical.upsert([later], deadline=unrequested_deadline())
    done = _complete(vectors, lexical, hits, visible_generation=1)
    assert [hit.chunk.chunk_id for hit in done] == ["c0", "c1", "c3", "c4", "c5"]
    assert all("not committed" not in hit.chunk.text for hit in done)


def test_a_row_deleted_between_the_phases_is_dropped(stores) -> None:
    vectors, lexical = stores
    hits = _first_phase_hits(vectors)
    vectors.delete(["c0"], deadline=unrequested_deadline())
    lexical.delete(["c0"], deadline=unrequested_deadline())
    done = _complete(vectors, lexical, hits, visible_generation=None)
    assert [hit.chunk.chunk_id for hit in done] == ["c1", "c2", "c3", "c4", "c5"]


def test_a_failing_store_is_replaced_by_the_other(stores) -> None:
    vectors, lexical = stores
    hits = _first_phase_hits(vectors)
    done = _complete(FailingGet(vectors), lexical, hits, visible_generation=None)
    assert [hit.chunk.title for hit in done] == [f"Title {n}" for n in range(6)]
    # Only the lexical channel answered: its store is asked first.
    answered = [Channel.LEXICAL]
    done = _complete(vectors, FailingGet(lexical), hits, visible_generation=None, answered=answered)
    assert [hit.chunk.title for hit in done] == [f"Title {n}" for n in range(6)]


def test_both_stores_failing_is_unavailable_naming_both(stores) -> None:
    vectors, lexical = stores
    hits = _first_phase_hits(vectors)
    with pytest.raises(Unavailable, match=r"failing qdrant-edge.*failing tantivy"):
        _complete(FailingGet(vectors), FailingGet(lexical), hits, visible_generation=None)


def test_no_time_left_reads_nothing(stores) -> None:
    vectors, lexical = stores
    hits = _first_phase_hits(vectors)
    with pytest.raises(DeadlineExceeded, match="no time left"):
        _complete(vectors, lexical, hits, visible_generation=None, deadline=Deadline.after(-1))
