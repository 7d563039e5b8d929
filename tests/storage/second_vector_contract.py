"""The second named vector (RAG_CROSS_LINGUAL_MODEL's) in every vector store
that carries one: written with the first, searched apart from it (its own
order, its own scope filtering), kept by payload rewrites and re-opening,
never silently missing.

Usage: subclass `SecondVectorContract` and provide `open_store(path,
second_dim)` returning a vector store (the same data for the same path)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.errors import StoreError
from services.core.models import ScopeFilter
from services.storage.base import SECOND_VECTOR, VectorQuery, unrequested_deadline
from tests.storage.harness import DIM, make_chunk, payload_of

SECOND_DIM = 4
OpenStore = Callable[[Path, int], Any]


def _first(x: float, y: float) -> list[float]:
    return [x, y] + [0.0] * (DIM - 2)


def _second(x: float, y: float) -> list[float]:
    return [x, y] + [0.0] * (SECOND_DIM - 2)


def _ids(hits: list[Any]) -> list[str]:
    return [hit.chunk.chunk_id for hit in hits]


class SecondVectorContract:
    @pytest.fixture
    def store(self, open_store: OpenStore, tmp_path: Path) -> Iterator[Any]:
        store = open_store(tmp_path / "store", SECOND_DIM)
        yield store
        store.close()

    @pytest.fixture
    def chunks(self, store: Any) -> list[Any]:
        """a first by the first vector, b first by the second; c elsewhere."""
        chunks = [
            make_chunk("doc-a"),
            make_chunk("doc-b", locale="zh-CN"),
            make_chunk("doc-c", scope_id="site-b"),
        ]
        first = [_first(1, 0), _first(0.6, 0.8), _first(0.8, 0.6)]
        second = [_second(0, 1), _second(1, 0), _second(0.9, 0.1)]
        store.upsert(chunks, first, second_vectors=second, deadline=unrequested_deadline())
        return chunks

    def test_each_vector_is_searched_apart(self, store: Any, chunks: list[Any]) -> None:
        a, b, c = (chunk.chunk_id for chunk in chunks)
        everywhere = ScopeFilter()
        by_first, by_second = store.search_many(
            [
                VectorQuery(_first(1, 0), 3, everywhere),
                VectorQuery(_second(1, 0), 3, everywhere, using=SECOND_VECTOR),
            ],
            deadline=unrequested_deadline(),
        )
        assert _ids(by_first) == [a, c, b]
        assert _ids(by_second) == [b, c, a]
        assert by_second[0].score == pytest.approx(1.0, abs=1e-5)

    def test_the_second_vector_search_honours_the_scope(
        self, store: Any, chunks: list[Any]
    ) -> None:
        query = VectorQuery(_second(1, 0), 3, ScopeFilter(scope_id="site-a"), using=SECOND_VECTOR)
        [hits] = store.search_many([query], deadline=unrequested_deadline())
        assert _ids(hits) == [chunks[1].chunk_id, chunks[0].chunk_id]
        query = VectorQuery(_second(1, 0), 3, ScopeFilter(locale="en"), using=SECOND_VECTOR)
        assert _ids(store.search_many([query], deadline=unrequested_deadline())[0]) == [
            chunks[2].chunk_id,
            chunks[0].chunk_id,
        ]

    def test_rewrites_and_reopening_keep_both_vectors(
        self, store: Any, chunks: list[Any], open_store: OpenStore, tmp_path: Path
    ) -> None:
        b = chunks[1]
        store.update_payload(
            [(b.chunk_id, payload_of(b, title="Renamed"))], deadline=unrequested_deadline()
        )
        store.close()
        reopened = open_store(tmp_path / "store", SECOND_DIM)
        try:
            probe = VectorQuery(_second(1, 0), 1, ScopeFilter(), using=SECOND_VECTOR)
            [[hit]] = reopened.search_many([probe], deadline=unrequested_deadline())
            assert hit.chunk.chunk_id == b.chunk_id and hit.score == pytest.approx(1.0, abs=1e-5)
            # `vectors` (diversity) reads the first vector.
            got = reopened.vectors([b.chunk_id], deadline=unrequested_deadline())[b.chunk_id]
            assert got == pytest.approx(_first(0.6, 0.8), abs=1e-6)
        finally:
            reopened.close()
        store.close = lambda: None  # closed above; the fixture's close is a no-op now

    def test_either_vector_is_read_back_by_name(self, store: Any, chunks: list[Any]) -> None:
        """What copying an index whole needs (bench.eval.storage_modes)."""
        a, b = chunks[0].chunk_id, chunks[1].chunk_id
        first = store.vectors([a, b, "missing"], unrequested_deadline())
        second = store.vectors([a, b], unrequested_deadline(), using=SECOND_VECTOR)
        assert sorted(first) == sorted(second) == sorted([a, b])
        assert first[b] == pytest.approx(_first(0.6, 0.8), abs=1e-6)
        assert second[a] == pytest.approx(_second(0, 1), abs=1e-6)
        assert second[b] == pytest.approx(_second(1, 0), abs=1e-6)

    def test_a_chunk_without_its_second_vector_is_refused(self, store: Any) -> None:
        chunk = make_chunk("doc-lonely")
        with pytest.raises(StoreError, match="second vectors"):
            store.upsert([chunk], [_first(1, 0)], deadline=unrequested_deadline())
        with pytest.raises(StoreError, match="second vectors"):
            store.upsert(
                [chunk], [_first(1, 0)], second_vectors=[], deadline=unrequested_deadline()
            )
        assert store.count(None, unrequested_deadline()) == 0

    def test_a_store_without_a_second_vector_refuses_one(
        self, open_store: OpenStore, tmp_path: Path
    ) -> None:
        plain = open_store(tmp_path / "plain", 0)
        try:
            with pytest.raises(StoreError):
                plain.upsert(
                    [make_chunk("doc-a")],
                    [_first(1, 0)],
                    second_vectors=[_second(1, 0)],
                    deadline=unrequested_deadline(),
                )
            probe = VectorQuery(_second(1, 0), 1, ScopeFilter(), using=SECOND_VECTOR)
            with pytest.raises(StoreError, match=SECOND_VECTOR):
                plain.search_many([probe], deadline=unrequested_deadline())
            with pytest.raises(StoreError, match=SECOND_VECTOR):
                plain.vectors(["doc-a"], unrequested_deadline(), using=SECOND_VECTOR)
        finally:
            plain.close()
