"""The query-vector cache is partitioned: a question is embedded once per
partition (the Retriever's: the scopes a request searches), so a cache hit,
which shows in an answer's stage timings, never tells one tenant that
another asked the same question."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from services.embedding.embedder import Embedder
from tests.support.stack import BackgroundStack

pytestmark = pytest.mark.integration


def _passes(embedder: Embedder) -> int:
    return embedder.query_stats().queries


def test_a_question_is_reused_within_its_partition_only(embedder: Embedder) -> None:
    question = f"which port does the ledger use {uuid.uuid4().hex}"
    start = _passes(embedder)
    first = embedder.embed_query(question, partition="alpha")
    again = embedder.embed_query(question, partition="alpha")
    assert _passes(embedder) - start == 1  # the second was a hit
    other = embedder.embed_query(question, partition="beta")
    assert _passes(embedder) - start == 2  # another partition: encoded again
    np.testing.assert_allclose(first, other, atol=1e-5)  # the same vector all the same
    assert again is first
    rows = embedder.embed_queries([question, question + " again"], partition="beta")
    assert _passes(embedder) - start == 3  # only the new text encoded
    np.testing.assert_allclose(rows[0], first, atol=1e-5)


def test_retrieve_reuses_a_vector_in_the_same_scope_and_not_across_scopes(
    embedded_stack: BackgroundStack, embedder: Embedder
) -> None:
    from services.contract.genproto.rag.retriever.v1 import retriever_pb2 as rpb

    question = f"how are ports assigned {uuid.uuid4().hex}"
    start = _passes(embedder)
    for scope in ("handbook", "handbook", "elsewhere"):
        embedded_stack.retrieve(question, filter=rpb.ScopeFilter(scope_id=scope))
    assert _passes(embedder) - start == 2  # handbook once, elsewhere once
