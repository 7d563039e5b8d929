"""The packaged mUSE v3 backend (the cross-lingual second model): it loads
offline from the pinned wheel's files, refuses files that are not the pinned
ones, and puts a Chinese sentence nearer its English translation than an
unrelated English sentence (the real model throughout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from services.embedding.embedder import Embedder
from services.embedding.muse_runtime import (
    PINNED_FILES,
    QUERY_BLAS_THREADS,
    MuseEncoder,
    checked_resources,
    resources_folder,
)

pytestmark = pytest.mark.integration


def test_a_chinese_sentence_is_nearest_its_english_translation(muse_embedder: Embedder) -> None:
    question = muse_embedder.embed_query("服务默认监听哪个端口？")
    translation, unrelated, near_miss = muse_embedder.embed_documents(
        [
            "Which port does the service listen on by default?",
            "The cat slept on the warm windowsill all afternoon.",
            "How do I rotate the API keys of a project?",
        ]
    )
    assert float(question @ translation) > float(question @ unrelated) + 0.3
    assert float(question @ translation) > float(question @ near_miss)


def test_the_model_declares_its_shape_languages_and_no_prompts(muse_embedder: Embedder) -> None:
    assert muse_embedder.dim == 512
    assert {"zh", "en"} <= muse_embedder.languages
    assert muse_embedder.prompts.query == "" and muse_embedder.prompts.passage == ""
    assert muse_embedder.identity.weights == PINNED_FILES["weights.npz"][:16]
    vectors = muse_embedder.embed_documents(["一", "a much longer English passage " * 40])
    assert vectors.shape == (2, 512)
    assert abs(float(vectors[1] @ vectors[1]) - 1.0) < 1e-4


def test_files_that_are_not_the_pinned_ones_are_refused(tmp_path: Path) -> None:
    for name in PINNED_FILES:
        shutil.copy(resources_folder() / name, tmp_path / name)
    (tmp_path / "sp.model").write_bytes(b"not the model")
    with pytest.raises(ConfigError, match="sha256"):
        checked_resources(tmp_path)


def test_queries_run_on_one_blas_thread_with_the_documents_weights() -> None:
    queries, documents = MuseEncoder.pair(checked_resources(resources_folder()), threads=2)
    text = ["Which port does the service listen on by default?"]
    # The same vector (to float rounding: threads sum in another order).
    assert float(queries.encode(text)[0] @ documents.encode(text)[0]) > 0.99999
    # One copy of the weights; only the BLAS thread limit differs.
    assert queries._backend.table is documents._backend.table
    assert (queries._backend.threads, documents._backend.threads) == (QUERY_BLAS_THREADS, 2)
    assert QUERY_BLAS_THREADS == 1


def test_documents_stay_on_their_own_thread_when_index_work_is_lowered() -> None:
    """OpenBLAS's worker threads run at the process's priority: index work
    lowered by RAG_INDEX_WORK_NICE must not hand half of each product to
    them, so its document encoder keeps to the calling thread."""
    from services.embedding.config import EmbedderConfig

    lowered = Embedder(EmbedderConfig(model="packaged:muse-v3", threads=2, document_nice=10))
    as_process = Embedder(EmbedderConfig(model="packaged:muse-v3", threads=2))
    assert lowered._documents._backend.threads == 1  # type: ignore[attr-defined]
    assert as_process._documents._backend.threads == 2  # type: ignore[attr-defined]
    text = ["Which port does the service listen on by default?"]
    assert float(lowered.embed_documents(text)[0] @ as_process.embed_documents(text)[0]) > 0.99999
