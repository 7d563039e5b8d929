"""Metadata terms and the shared vector payload layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.models import ChunkPayload
from services.storage.payload import (
    chunk_payload,
    metadata_from_terms,
    metadata_term,
    metadata_terms,
    payload_fields,
    stored_chunk_from_payload,
)
from tests.storage.harness import make_chunk, stored

pytestmark = pytest.mark.unit


def test_keys_are_escaped_so_pairs_never_collide() -> None:
    assert metadata_term("a=b", "c") != metadata_term("a", "b=c")
    assert metadata_term("100%", "x") != metadata_term("100%25", "x")


@given(st.dictionaries(st.text(), st.text(), max_size=6))
def test_terms_round_trip(metadata: dict[str, str]) -> None:
    assert metadata_from_terms(metadata_terms(metadata)) == metadata


@given(st.text(), st.text(), st.text(), st.text())
def test_distinct_pairs_give_distinct_terms(k1: str, v1: str, k2: str, v2: str) -> None:
    if (k1, v1) != (k2, v2):
        assert metadata_term(k1, v1) != metadata_term(k2, v2)


def test_payload_round_trips_a_chunk() -> None:
    chunk = make_chunk("doc-1", 3, metadata={"product": "api", "a=b": "c"}, generation=5)
    assert stored_chunk_from_payload(chunk_payload(chunk)) == stored(chunk)
    assert stored_chunk_from_payload(chunk_payload(chunk)).generation == 5


def test_payload_is_compact() -> None:
    payload = chunk_payload(make_chunk("doc-1", metadata={"product": "api"}, generation=3))
    assert set(payload) == {
        "chunk_id", "doc_id", "position", "url", "title", "heading_path", "scope_id",
        "locale", "content_hash", "metadata", "meta", "text", "generation",
    }  # fmt: skip
    assert payload["meta"] == ["product=api"]
    assert payload["generation"] == 3


def test_a_payload_rewrite_carries_the_generation() -> None:
    payload = ChunkPayload("u", "t", "h", "s", "en", {"k": "v"}, generation=9)
    assert payload_fields(payload) == {
        "url": "u",
        "title": "t",
        "heading_path": "h",
        "scope_id": "s",
        "locale": "en",
        "metadata": {"k": "v"},
        "meta": ["k=v"],
        "generation": 9,
    }


def test_rows_from_before_generations_read_as_generation_zero() -> None:
    payload = chunk_payload(make_chunk("doc-1"))
    del payload["generation"]
    assert stored_chunk_from_payload(payload).generation == 0
