"""The Embedder's document batches in short passes, on the real model: rows
come back in input order with the vectors each text gets alone; on torch a
query that arrives during a batch runs after the pass in progress, not after
the batch; on ONNX Runtime it runs while that pass runs. The order is
observed through the encoder's calls, never through time."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from tests.embedding.support import wait_until

pytestmark = pytest.mark.integration

TIMEOUT_S = 60


class GatedEncoder:
    """Wraps the real encoder: records every call's texts; the first call
    waits until the test releases it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[list[str]] = []
        self.first_call = threading.Event()
        self.release = threading.Event()

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if len(self.calls) == 1:
            self.first_call.set()
            assert self.release.wait(TIMEOUT_S)
        return self.inner.encode(texts)


@pytest.fixture
def gates(monkeypatch: pytest.MonkeyPatch) -> list[GatedEncoder]:
    """The encoders of the Embedders the test builds, each gated, in the order built."""
    from services.embedding import st_runtime

    gates: list[GatedEncoder] = []
    real = st_runtime._encoder_for

    def gated(config: EmbedderConfig, model: Any) -> GatedEncoder:
        gates.append(GatedEncoder(real(config, model)))
        return gates[-1]

    monkeypatch.setattr(st_runtime, "_encoder_for", gated)
    return gates


def test_rows_come_back_in_input_order_with_their_own_vectors(embedder: Embedder) -> None:
    texts = ["short", "a " * 700, "a medium sized text about rate limits " * 5, "b " * 450, "x"]
    batch = embedder.embed_documents(texts)
    alone = np.stack([embedder.embed_documents([text])[0] for text in texts])
    np.testing.assert_allclose(batch, alone, atol=1e-5)
    assert embedder.embed_documents([]).shape == (0, embedder.dim)


def test_a_query_runs_between_two_passes_of_a_document_batch(gates: list[GatedEncoder]) -> None:
    model = Embedder(EmbedderConfig(backend="torch", query_cache_size=0))
    gate = gates[0]
    documents = [f"document {n}: " + "word " * 200 for n in range(3)]  # one pass each
    batch = threading.Thread(target=model.embed_documents, args=(documents,))
    batch.start()
    assert gate.first_call.wait(TIMEOUT_S)
    query = threading.Thread(target=model.embed_query, args=("the query",))
    query.start()
    wait_until(lambda: model.query_stats().waiting == 1)
    gate.release.set()
    batch.join(TIMEOUT_S)
    query.join(TIMEOUT_S)
    assert gate.calls == [documents[:1], ["the query"], documents[1:2], documents[2:]]


def test_on_onnx_a_query_runs_while_a_document_pass_runs(
    gates: list[GatedEncoder], tmp_path: Path
) -> None:
    config = EmbedderConfig(backend="onnx", onnx_cache_dir=tmp_path, query_cache_size=0)
    model = Embedder(config)
    assert model.document_scheduling == "alongside queries"
    gate = gates[0]  # one session: fp32 queries and documents
    documents = [f"document {n}: " + "word " * 200 for n in range(3)]  # one pass each
    batch = threading.Thread(target=model.embed_documents, args=(documents,))
    batch.start()
    assert gate.first_call.wait(TIMEOUT_S)  # the first document pass is in the model
    answer: list[np.ndarray] = []
    query = threading.Thread(target=lambda: answer.append(model.embed_query("the query")))
    query.start()
    query.join(TIMEOUT_S)
    assert not query.is_alive() and answer  # done while the document pass still runs
    gate.release.set()
    batch.join(TIMEOUT_S)
    assert gate.calls == [documents[:1], ["the query"], documents[1:2], documents[2:]]
    np.testing.assert_allclose(answer[0], model.embed_query("the query"), atol=1e-6)


def test_torch_keeps_documents_between_queries(embedder: Embedder) -> None:
    assert embedder.document_scheduling == "between queries"
